"""The calibration fit (``python -m training.calibration``, issue 42 item 3) on the
vendored train slices (tests/data/train: held-out rows of two files), through the serve
path's stage 1 with the real embedhead model: it writes a calibration the verifier reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundproxy.guards.verdict.uncertainty import Calibration
from groundproxy.models.ranker_file import read_ranker
from training.calibration import Recipe, file_weights, fit_rows, held_out, main

pytestmark = pytest.mark.slow  # loads the real embedder and verifier

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_fit_command_writes_a_calibration_the_verifier_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "model" / "calibration.json"
    out.parent.mkdir()
    args = ["--verifier", "embedhead", "--data", str(DATA), "--rows", "8"]
    main([*args, "--cache", str(tmp_path / "cache"), "--out", str(out)])
    content = json.loads(out.read_text(encoding="utf-8"))
    assert content["object"] == "groundproxy.calibration" and content["verifier"] == "embedhead"
    assert content["method"] == Recipe.method and content["fit"]["threshold"] == 0.57
    assert content["fit"]["n_files"] == 2 and content["fit"]["n_claims"] > 0
    cal = read_ranker(out.parent)
    assert isinstance(cal, Calibration) and cal.a > 0
    assert cal.p_supported(0.57, 0.57) == pytest.approx(0.5)  # about the threshold in force
    # the rows fitted on are held out of the verifier's training, in a seeded order
    rows = held_out(DATA / "train" / "halueval-qa.jsonl", 8)
    assert len(rows) == 8 and rows == held_out(DATA / "train" / "halueval-qa.jsonl", 8)
    # a rerun reads the cache: the same calibration, no model run
    main([*args, "--cache", str(tmp_path / "cache"), "--out", str(out)])
    assert read_ranker(out.parent) == cal
    assert "rows" in capsys.readouterr().err


def test_each_file_weighs_the_same() -> None:
    w = file_weights(["a", "a", "a", "b"])
    assert w.tolist() == pytest.approx([2 / 3, 2 / 3, 2 / 3, 2.0])
    balanced = file_weights(["a", "a", "a", "b"], [True, True, False, True])
    assert balanced.tolist() == pytest.approx([0.5, 0.5, 1.0, 2.0])
    with pytest.raises(SystemExit, match="both kinds"):
        fit_rows([], Recipe())
