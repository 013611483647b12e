"""Which answer-level uncertainty ranks the verifier's own errors (how the served
``ClaimResult.uncertainty`` was chosen: :mod:`groundproxy.guards.verdict.uncertainty`)::

    python -m bench.uncertainty_margin --pool 200

For every file of TRAIN (where the choice was made) and EVAL (reported, never used to
choose): the AUROC, over each file's seeded pool (seed 1234, the serve path's cached
signals: ``bench.kshot``'s caches, one folder per split), of three answer scores for
zero-shot's errors (the decision ≠ the label):

- ``entropy``: the largest normalized entropy of the answer's claims (what the field held);
- ``margin (decided)``: the decision margin on the decided P(supported);
- ``margin (raw)``: the decision margin on the verifier's best raw P(supported) over the
  claim's passages — :func:`~groundproxy.guards.verdict.uncertainty.margin_risk` aggregated by
  :func:`~groundproxy.guards.verdict.uncertainty.decision_risk`, what is served.

Nothing is fitted: the three differ only in what they read. Needs ``../shared/data``.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.judge import auc, served_threshold, views
from bench.kshot import DATA
from bench.text_table import table
from groundproxy.guards.adapter.signals import CLAIM_FIELDS
from groundproxy.guards.verdict.uncertainty import decision_risk, margin_risk

F = {name: i for i, name in enumerate(CLAIM_FIELDS)}
Score = Callable[[list[list[float]], float], float]


def _entropy(claims: list[list[float]], tau: float) -> float:
    return max((c[F["uncertainty"]] for c in claims), default=1.0)


def _margin(field: str) -> Score:
    def score(claims: list[list[float]], tau: float) -> float:
        if not claims:
            return 1.0
        pairs = [
            (margin_risk(c[F[field]], bool(c[F["supported"]]), tau), bool(c[F["supported"]]))
            for c in claims
        ]
        return decision_risk(pairs)

    return score


SCORES: dict[str, Score] = {
    "entropy": _entropy,
    "margin (decided)": _margin("p_supported"),
    "margin (raw)": _margin("raw_supported"),
}


def _split_rows(folder: Path, pool: int, cached: bool) -> list[list[str]]:
    tau = served_threshold()
    rows, per_score = [], {name: [] for name in SCORES}  # type: dict[str, list[float]]
    for v in views(folder, pool, None, cached):
        errors = [int(z != y) for z, y in zip(v.zero, v.labels, strict=True)]
        claims: Sequence[Any] = v.signal_claims
        cells = [v.name, str(len(errors))]
        for name, fn in SCORES.items():
            a = auc([fn(c, tau) for c in claims], errors)
            per_score[name].append(a)
            cells.append(f"{a:.3f}")
        rows.append(cells)
    means = [f"{statistics.mean(x):.3f}" for x in per_score.values()]
    rows.append(["**mean**", "", *means])
    served, before = per_score["margin (raw)"], per_score["entropy"]
    better = sum(s > e for s, e in zip(served, before, strict=True))
    rows.append(["served better than entropy", "", "", "", f"{better} of {len(served)} files"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--pool", type=int, default=200)
    ap.add_argument("--cached-only", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    parts = [f"$ python -m bench.uncertainty_margin --pool {args.pool}", ""]
    for split in ("train", "eval"):
        parts += [
            f"{split.upper()}: AUROC of each answer score for zero-shot's own errors",
            table(
                ["file", "rows", *SCORES],
                _split_rows(args.data / split, args.pool, args.cached_only),
            ),
            "",
        ]
    text = "\n".join(parts)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
