"""Would a zero-shot decision proven on judge labels gate the judge on public data
(``python -m bench.judge_zero --pool 200``)?

``calibrate --fit`` keeps the zero-shot decision (a zero-shot record, no adapter) when no
adapter beats it on the tenant's labels; with ``judge.labels`` those labels are the judge's
own verdicts. When the record shows zero-shot as good as a judge (balanced accuracy ≥
``guards.judge.merge.ADAPTER_GOOD`` on ≥ ``ZERO_SHOT_PROOF`` labels), zero-shot decides the
tenant's answers alone (``judge.audit`` excepted). No per-answer cut is asked of it: the
verifier's uncertainty barely ranks its own errors (the first table: its AUROC and
zero-shot's error below each cut, on TRAIN).

Each TRAIN file's pool is split in two (seeded): the first half's labels come from a
simulated judge (the label, flipped with 1 − accuracy), from the answers an ``escalate:
uncertain`` tenant escalates (the biased tail ``judge.labels`` sees) or from every answer;
the file is "proven" when zero-shot's balanced accuracy on them reaches ADAPTER_GOOD; then
zero-shot's balanced accuracy on the held-out half (true labels) beside the judge's.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from pathlib import Path

from bench.judge import FileView, auc, judge_says, views
from bench.kshot import DATA
from bench.text_table import table
from groundproxy.guards.judge.merge import ADAPTER_GOOD, ZERO_SHOT_PROOF
from groundproxy.guards.judge.opinion import DEFAULT_MIN_UNCERTAINTY
from groundproxy.proxy.cli.adapt import balanced_accuracy
from training.signal_cache import POOL_SEED

CUTS = (0.3, 0.5, 0.7, 0.8, 0.9)
JUDGES = (0.85, 0.95)


def _halves(v: FileView, seed: int) -> tuple[list[int], list[int]]:
    order = list(range(len(v.labels)))
    random.Random(seed).shuffle(order)
    return order[: len(order) // 2], order[len(order) // 2 :]


def judged_zero(v: FileView, accuracy: float, tail: bool, seed: int = 0) -> float | None:
    """Zero-shot's balanced accuracy on one half of ``v``'s simulated judge labels
    (``tail``: only the answers ``escalate: uncertain`` escalates); None: too few labels."""
    fit_on, _ = _halves(v, seed)
    if tail:
        fit_on = [i for i in fit_on if v.unc[i] >= DEFAULT_MIN_UNCERTAINTY]
    rng = random.Random(7 + seed)
    said = [judge_says(v.labels[i], accuracy, rng) for i in fit_on]
    if len(said) < ZERO_SHOT_PROOF or min(said.count(0), said.count(1)) < 2:
        return None
    return balanced_accuracy(said, [v.zero[i] for i in fit_on])


def _below(vs: Sequence[FileView], cut: float) -> list[str]:
    held = [(v, i) for v in vs for i in _halves(v, 0)[1]]
    sure = [int(v.zero[i] != v.labels[i]) for v, i in held if v.unc[i] < cut]
    return [f"{len(sure) / len(held):.0%}", f"{sum(sure) / max(1, len(sure)):.3f}"]


def _file_row(v: FileView) -> list[str]:
    _, test_on = _halves(v, 0)
    cells = [v.name, f"{balanced_accuracy(v.labels, v.zero):.3f}"]
    cells.append(f"{auc(v.unc, [int(z != y) for z, y in zip(v.zero, v.labels, strict=True)]):.3f}")
    proven = False
    for tail in (True, False):
        for accuracy in JUDGES:
            zero = judged_zero(v, accuracy, tail)
            proven = proven or (zero or 0.0) >= ADAPTER_GOOD
            cells.append("–" if zero is None else f"{zero:.3f}")
    held = balanced_accuracy([v.labels[i] for i in test_on], [v.zero[i] for i in test_on])
    cells.append(f"{held:.3f}" if proven else "not proven")
    return cells


def run_train_zero(vs: Sequence[FileView], pool: int) -> str:
    """The tables for ``python -m bench.judge_zero`` over TRAIN file views ``vs``."""
    judges = [f"{'tail' if t else 'all'} {a}" for t in (True, False) for a in JUDGES]
    return "\n".join([
        f"TRAIN: {len(vs)} files, pool {pool} per file (seed {POOL_SEED}); held-out halves: "
        "share of answers whose every claim's uncertainty is below the cut and zero-shot's "
        "error on them",
        table(["cut", "below", "zero-shot error"], [[f"{c}", *_below(vs, c)] for c in CUTS]),
        "",
        "per file: zero-shot balanced accuracy (true labels), the AUROC of the answer "
        "uncertainty for its errors, zero-shot's balanced accuracy on a simulated judge's "
        f"labels of one half (tail: uncertainty ≥ {DEFAULT_MIN_UNCERTAINTY} only; all: every "
        f"answer; judge accuracy 0.85 / 0.95) — proven at ≥ {ADAPTER_GOOD} — and, when "
        "proven, zero-shot's balanced accuracy on the other half",
        table(
            ["file", "zero-shot", "unc AUROC", *(f"on {j}" for j in judges), "held-out"],
            [_file_row(v) for v in vs],
        ),
    ])  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--pool", type=int, default=200)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--cached-only", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    text = run_train_zero(
        views(args.data / "train", args.pool, args.only, args.cached_only), args.pool
    )
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
