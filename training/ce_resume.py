"""Resumable cross-encoder training state (training.cross_encoder).

A run with a step plan (``--steps N``) saves its whole state — weights, AdamW moments, the
step reached, the examples seen, the wall time spent — into ``<out>/resume/`` every
``--save-every`` minutes and when its time box (``--minutes``) ends. Running the same
command again continues from there on the same learning-rate curve, so a CPU can keep
improving one model across sessions, and a short accelerator run can be followed by more.

The state is written atomically (a temporary file, then ``os.replace``): a run killed while
saving leaves the previous state whole. ``resume/plan.json`` records what must not change
between the runs of one plan (step count, batch size, learning rate, data and its sha256s,
the row cap); a run whose settings differ refuses with a message naming the first
difference, unless ``--fresh`` starts the plan over.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLAN_KEYS = (
    "steps",
    "batch_size",
    "lr",
    "warmup",
    "cap",
    "freeze_word_embeddings",
    "nli_cap",
    "nli_share",
)


class PlanMismatchError(ValueError):
    """The saved state belongs to another plan (settings or data differ)."""


@dataclass
class Progress:
    """Where a plan stands: ``step`` of ``plan['steps']``, after ``seen`` examples."""

    step: int = 0
    seen: int = 0
    train_s: float = 0.0


def plan_of(settings: dict[str, Any], data_sha256: dict[str, str]) -> dict[str, Any]:
    """The settings that define a plan, as saved in ``resume/plan.json``."""
    return {**{k: settings.get(k) for k in PLAN_KEYS}, "data_sha256": data_sha256}


def _check_plan(saved: dict[str, Any], plan: dict[str, Any]) -> None:
    for key in (*PLAN_KEYS, "data_sha256"):
        if saved.get(key) != plan.get(key):
            what = "the training data" if key == "data_sha256" else f"--{key.replace('_', '-')}"
            raise PlanMismatchError(
                f"the saved training state was made with another {what} "
                f"({saved.get(key)!r} there, {plan.get(key)!r} now): run with the same "
                "settings to resume it, or pass --fresh to start over"
            )


def load(out: Path, plan: dict[str, Any], model: Any, opt: Any, fresh: bool) -> Progress:
    """Restore ``model`` and ``opt`` from ``out/resume`` when a state of ``plan`` is there.

    Returns the progress to continue from (step 0 when there is nothing to resume, or
    ``fresh``)."""
    import torch

    folder = out / "resume"
    state_file, plan_file = folder / "state.pt", folder / "plan.json"
    if fresh or not state_file.is_file():
        return Progress()
    _check_plan(json.loads(plan_file.read_text(encoding="utf-8")), plan)
    state = torch.load(state_file, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return Progress(int(state["step"]), int(state["seen"]), float(state["train_s"]))


def save(out: Path, plan: dict[str, Any], model: Any, opt: Any, progress: Progress) -> Path:
    """Write the state of ``plan`` at ``progress`` atomically; returns the state file."""
    import torch

    folder = out / "resume"
    folder.mkdir(parents=True, exist_ok=True)
    state_file = folder / "state.pt"
    tmp = folder / "state.pt.tmp"
    torch.save(
        {
            "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "optimizer": opt.state_dict(),
            "step": progress.step,
            "seen": progress.seen,
            "train_s": progress.train_s,
        },
        tmp,
    )
    os.replace(tmp, state_file)
    plan_tmp = folder / "plan.json.tmp"
    plan_tmp.write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(plan_tmp, folder / "plan.json")
    return state_file


def lr_scale(frac: float, warmup: float) -> float:
    """The learning-rate factor at ``frac`` of the plan (steps, or the time box): linear
    warm-up over the first ``warmup`` fraction, then linear decay to 1 % (never 0)."""
    scale = frac / warmup if frac < warmup else max(0.0, (1.0 - frac) / (1.0 - warmup))
    return max(scale, 0.01)


def pick_device(name: str) -> Any:
    """``auto``: the GPU when torch sees one, else the CPU."""
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)
