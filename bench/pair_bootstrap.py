"""Paired bootstrap of two ``bench.verifier_pair`` runs over the same seeded rows: the gain in
mean per-file balanced accuracy from run A's work folder to run B's, for the ladder and for
verifier B on every claim, with a 95 % interval (rows resampled within each file, 1,000
draws, seed 7).

    python -m bench.pair_bootstrap --a DIR_A --b DIR_B [--share 0.25 --margin 0.7]
"""

from __future__ import annotations

import argparse
import pickle
import random
import statistics
from pathlib import Path
from typing import Any

from bench.verifier_pair import ladder
from groundproxy.models.scoring import balanced_accuracy

DRAWS = 1000


def _files(a: Path, b: Path, share: float, margin: float) -> dict[str, list[list[int]]]:
    """Per file: labels, ladder A, ladder B, verifier B alone under A, under B."""
    out: dict[str, list[list[int]]] = {}
    for where in sorted(a.glob("*.pkl")):
        ra: dict[Any, Any] = {r["id"]: r for r in pickle.loads(where.read_bytes())}
        rb: dict[Any, Any] = {r["id"]: r for r in pickle.loads((b / where.name).read_bytes())}
        ids = [i for i in ra if i in rb]
        y = [ra[i]["label"] for i in ids]
        if len(set(y)) < 2:
            continue
        out[where.stem] = [
            y,
            [ladder(ra[i], share, margin)[0] for i in ids],
            [ladder(rb[i], share, margin)[0] for i in ids],
            [ra[i]["zero"][1] for i in ids],
            [rb[i]["zero"][1] for i in ids],
        ]
    return out


def _gain(files: dict[str, list[list[int]]], before: int, after: int) -> float:
    return statistics.mean(
        balanced_accuracy(c[0], c[after]) - balanced_accuracy(c[0], c[before])
        for c in files.values()
        if len(set(c[0])) == 2
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--a", type=Path, required=True)
    ap.add_argument("--b", type=Path, required=True)
    ap.add_argument("--share", type=float, default=0.25)
    ap.add_argument("--margin", type=float, default=0.7)
    args = ap.parse_args()
    files = _files(args.a, args.b, args.share, args.margin)
    rng = random.Random(7)
    for name, before, after in (("ladder", 1, 2), ("verifier B on every claim", 3, 4)):
        draws = []
        for _ in range(DRAWS):
            sample = {}
            for f, cols in files.items():
                idx = [rng.randrange(len(cols[0])) for _ in cols[0]]
                sample[f] = [[col[i] for i in idx] for col in cols]
            draws.append(_gain(sample, before, after))
        draws.sort()
        lo, hi = draws[int(0.025 * DRAWS)], draws[int(0.975 * DRAWS) - 1]
        print(f"{name}: {_gain(files, before, after):+.3f}  95% CI [{lo:+.3f}, {hi:+.3f}]")


if __name__ == "__main__":
    main()
