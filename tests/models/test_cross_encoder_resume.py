"""The cross-encoder trainer resumes a step plan where it stopped (issue 11, item 4).

A real (tiny) run of training.cross_encoder on the packaged MiniLM backbone: a 6-step
plan stopped after 3 steps saves its state; the same command continues to step 6 from that
state (not from scratch), and a changed setting is refused with a message naming it.
Data: a seeded slice of two train files (vendored in tests/data/train) copied to a temporary
folder.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from training import ce_resume
from training.cross_encoder import main

TRAIN = Path(__file__).resolve().parents[1] / "data" / "train"
pytestmark = pytest.mark.slow


def _slice(dest: Path) -> Path:
    (dest / "train").mkdir(parents=True)
    for name in ("fever-nli.jsonl", "halueval-qa.jsonl"):
        lines = (TRAIN / name).read_text(encoding="utf-8").splitlines()
        rows = random.Random(f"resume:{name}").sample(lines, 60)
        (dest / "train" / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    return dest


def _args(data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--data", str(data), "--out", str(out), "--steps", "6", "--batch-size", "4",
        "--threads", "1", "--device", "cpu", *extra,
    ]  # fmt: skip


def test_a_step_plan_stops_and_resumes_where_it_stopped(tmp_path: Path) -> None:
    data, out = _slice(tmp_path / "data"), tmp_path / "ckpt"
    main(_args(data, out, "--run-steps", "3"))
    first = json.loads((out / "ce_manifest.json").read_text())
    assert (first["steps"], first["planned_steps"], first["complete"]) == (3, 6, False)
    assert first["examples_seen"] == 12
    state_file = out / "resume" / "state.pt"
    assert state_file.is_file()
    saved_at = state_file.stat().st_mtime_ns

    main(_args(data, out))  # the same command: continues from step 3
    second = json.loads((out / "ce_manifest.json").read_text())
    assert (second["steps"], second["complete"]) == (6, True)
    assert second["examples_seen"] == 24  # 12 before + 12 now, not 24 from scratch
    assert state_file.stat().st_mtime_ns > saved_at
    assert (out / "model.safetensors").is_file()

    with pytest.raises(ce_resume.PlanMismatchError, match="--lr"):
        main(_args(data, out, "--lr", "1e-4"))
    main(_args(data, out, "--lr", "1e-4", "--fresh", "--run-steps", "1"))
    assert json.loads((out / "ce_manifest.json").read_text())["steps"] == 1


def test_lr_scale_warms_up_then_decays_to_one_percent() -> None:
    assert ce_resume.lr_scale(0.0, 0.1) == 0.01
    assert ce_resume.lr_scale(0.05, 0.1) == pytest.approx(0.5)
    assert ce_resume.lr_scale(0.1, 0.1) == pytest.approx(1.0)
    assert ce_resume.lr_scale(0.55, 0.1) == pytest.approx(0.5)
    assert ce_resume.lr_scale(1.0, 0.1) == 0.01
