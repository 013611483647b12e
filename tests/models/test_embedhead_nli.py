"""The embedhead's training reads NLI pairs (issue 42, the fast rung): ``prepare --nli``
featurizes them as extra TRAINING rows only — never validation rows — and ``fit`` weighs
each set as a source of its own, reports the held-back NLI rows apart and compares the
result with the shipped head on the same held-out train/ contexts.

Real runs of training.prepare (the packaged MiniLM embedder) and training.fit on
two 40-row train files and the vendored seeded slice of the permissive NLI file
(tests/data/nli, licences in tests/data/README.md).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from groundproxy.models.embedhead_verifier import MODEL_DIR
from training import nli
from training.prepare import in_validation

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SLICE = DATA / "nli" / "nli-permissive.jsonl.gz"
NLI_HELD = "nli_held"  # the split of the NLI rows held back (prepare.NLI_HELD)


def run(module: str, *args: str) -> None:
    """``python -m training.<module> ARGS`` from the repository root (the real CLI)."""
    cmd = [sys.executable, "-m", f"training.{module}", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("embedhead-nli")
    data = root / "data"
    (data / "train").mkdir(parents=True)
    for name in ("fever-nli.jsonl", "halueval-qa.jsonl"):
        lines = (DATA / "train" / name).read_text(encoding="utf-8").splitlines()
        rows = random.Random(f"embedhead-nli:{name}").sample(lines, 40)
        (data / "train" / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    work = root / "work"
    run("prepare", "--data", str(data), "--work", str(work), "--synth-per-source", "5",
        "--val-frac", "0.3", "--nli", str(SLICE), "--nli-cap", "0")  # fmt: skip
    return work


def _meta(work: Path) -> list[dict[str, Any]]:
    lines = (work / "meta.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_prepare_adds_nli_pairs_as_training_rows_never_validation_rows(prepared: Path) -> None:
    import numpy as np

    meta = _meta(prepared)
    assert np.load(prepared / "features.npy").shape[0] == len(meta)
    nli_rows = [m for m in meta if m["source"].startswith("nli:")]
    assert len(nli_rows) == 80  # every row of the slice (--nli-cap 0)
    assert {m["split"] for m in nli_rows} == {"train", NLI_HELD}
    # validation (model choice, threshold) is held-out train/ contexts only
    val_sources = {m["source"] for m in meta if m["split"] == "val"}
    assert val_sources and not any(s.startswith("nli:") for s in val_sources)
    # the rows held back are exactly the premises nli.py holds back, each set on its own
    held = {
        f"nli:{r['source']}"
        for r in nli.read_rows(SLICE)
        if in_validation(r["context"], nli.VAL_FRAC)
    }
    assert {m["source"] for m in nli_rows if m["split"] == NLI_HELD} == held
    assert len({m["source"] for m in nli_rows}) == 10
    manifest = json.loads((prepared / "manifest_prepare.json").read_text(encoding="utf-8"))
    assert manifest["data_files"]["nli/nli-permissive.jsonl.gz"]
    counts = manifest["nli_rows"]
    assert sum(c["train"] + c[NLI_HELD] for c in counts.values()) == 80
    assert {s for s, c in counts.items() if c[NLI_HELD]} == held


@pytest.mark.slow
def test_fit_weighs_nli_sets_reports_them_apart_and_compares_with_the_shipped_head(
    prepared: Path, tmp_path: Path
) -> None:
    out = tmp_path / "head"
    run("fit", "--work", str(prepared), "--out", str(out), "--candidates", "linear",
        "--linear-epochs", "2", "--nli-share", "0.5", "--baseline", str(MODEL_DIR))  # fmt: skip
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    training = meta["training"]
    assert training["n_train_nli"] > 0 and training["nli_share"] == 0.5
    assert len(training["nli_sets"]) == 10
    assert "nli/nli-permissive.jsonl.gz" in training["data_files"]
    # the threshold and the choice saw no NLI row: validation figures are train/ sources
    assert not any(s.startswith("nli:") for s in meta["validation"]["per_source"])
    held = meta["validation"]["nli_held_back"]
    expected = {m["source"] for m in _meta(prepared) if m["split"] == NLI_HELD}
    assert set(held) == expected
    for figures in held.values():
        assert figures["n"] >= 1
        assert 0.0 <= figures.get("three_way_accuracy", 0.0) <= 1.0
    cmp = meta["comparison"]
    assert set(cmp["baseline"]["per_source"]) == set(cmp["new"]["per_source"])
    assert {"fever-nli", "halueval-qa"} <= set(cmp["new"]["per_source"])
    assert (
        cmp["baseline"]["threshold"]
        == json.loads((MODEL_DIR / "meta.json").read_text())["threshold"]
    )
    assert (out / "model.int8.onnx").is_file() and (out / "model.onnx").is_file()

    # without NLI rows (same features): no NLI training row, same validation rows
    plain = tmp_path / "plain"
    run("fit", "--work", str(prepared), "--out", str(plain), "--candidates", "linear",
        "--linear-epochs", "2", "--nli-sets", "none")  # fmt: skip
    plain_meta = json.loads((plain / "meta.json").read_text(encoding="utf-8"))
    assert plain_meta["training"]["n_train_nli"] == 0
    assert plain_meta["training"]["n_val"] == training["n_val"]
    assert plain_meta["training"]["n_train"] == training["n_train"] - training["n_train_nli"]
