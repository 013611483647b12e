"""Speed of a model built by ``groundproxy models build``: ms per pair, int8 and fp32.

    nice -n 10 .venv/bin/python bench/built_speed.py NAME [--models-dir DIR] [--pairs 32]
        [--data ../shared/data] [--file halueval-qa.jsonl]

Pairs are (response, context) of the first ``--pairs`` rows of an eval file (the verifier
selects its own evidence window, as in the guard). Each configuration scores all pairs
once to warm up, then once timed; one process, side by side, threads=2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.needs_data import require

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundproxy.guards.types import VERDICTS, Pair
from groundproxy.models.build import PROBES
from groundproxy.models.built_verifier import BuiltVerifier, Variant
from groundproxy.models.registry import models_dir_for


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("--models-dir", type=Path, default=None)
    ap.add_argument("--pairs", type=int, default=32)
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--file", default="halueval-qa.jsonl")
    args = ap.parse_args()
    require(args.data)
    folder = (args.models_dir or models_dir_for()) / args.name
    rows = []
    with (args.data / "eval" / args.file).open(encoding="utf-8") as fh:
        for line in fh:
            if len(rows) >= args.pairs:
                break
            d = json.loads(line)
            rows.append(Pair(str(d["response"] or ""), str(d["context"] or "")))
    configs: list[tuple[Variant, int]] = [("int8", 1), ("int8", 16), ("fp32", 1), ("fp32", 16)]
    print(f"{args.name}: {len(rows)} pairs from {args.file}")
    for variant, batch in configs:
        v = BuiltVerifier(folder, variant, batch_size=batch)
        v.score(rows)
        t0 = time.perf_counter()
        v.score(rows)
        ms = 1000.0 * (time.perf_counter() - t0) / len(rows)
        tokens = sum(
            len(v._encode_nli(p)[0] if v.kind == "nli" else v._encode_causal(p)[0]) for p in rows
        ) / len(rows)
        print(f"  {variant:<5} batch {batch:>2}: {ms:8.1f} ms/pair  (mean {tokens:.0f} tokens)")
    v = BuiltVerifier(folder, "int8")
    for expected, pair in PROBES:
        p = v.score([pair])[0]
        got = max(VERDICTS, key=lambda x: float(getattr(p, x)))
        print(f"  probe {expected:>12} → {got:<12} {p.as_dict()}  {pair.claim}")


if __name__ == "__main__":
    main()
