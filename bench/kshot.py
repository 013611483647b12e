"""k-shot adaptation benchmark (issue 11): the tenant's adapter vs the zero-shot decision.

For each file in ``../shared/data/eval``: a seeded pool of rows is verified once by the
serve path (:func:`groundproxy.proxy.adapt.featurize`: the row's context as request
evidence, default policy, no tenant index) giving the answer-level features, the zero-shot
decision ("any claim not supported") and the lexical baseline's score (the seed-001
method of ``bench/accuracy.py``, threshold 0.5). Then per seed and k: k rows are the
tenant's labels (:func:`groundproxy.proxy.adapt.fit_combiner`, cross-fitted balanced
threshold, exactly what ``calibrate --fit`` writes), the test rows are the others (at most
``--test``), and balanced accuracy is reported for zero-shot, adapted and lexical on the
same test rows (mean ± sd over seeds).

    python -m bench.kshot --ks 50,100,200 --seeds 5 --test 300 --out bench/results/kshot.txt
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.accuracy import lexical_scores
from groundproxy.guards.adapter import Adapter
from groundproxy.guards.lexical import LexicalVerifier
from groundproxy.proxy.adapt import balanced_accuracy, featurize, fit_combiner
from groundproxy.proxy.evaluate import eval_policy
from groundproxy.proxy.feedback import parse_labelled
from groundproxy.proxy.guarding import build_guard
from groundproxy.proxy.settings import Settings

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def pool_rows(path: Path, size: int, seed: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    random.Random(seed).shuffle(rows)
    return rows[:size]


def run_file(path: Path, ks: list[int], seeds: int, test: int, guard: Any) -> dict[str, Any]:
    rows = pool_rows(path, max(ks) + test, 1234)
    policy = eval_policy("default", "context")
    started = time.perf_counter()
    scored = [featurize(parse_labelled(r), policy, guard) for r in rows]
    secs = time.perf_counter() - started
    lex, _ = lexical_scores(rows, LexicalVerifier())
    labels = [int(r["label_hallucinated"]) for r in rows]
    feats = [f for f, _ in scored]
    zero = [z for _, z in scored]
    lexp = [int(p < 0.5) for p in lex]
    out: dict[str, Any] = {
        "file": path.stem,
        "pool": len(rows),
        "ms_per_row": 1000 * secs / len(rows),
    }
    for k in ks:
        res: dict[str, list[float]] = {"zero": [], "adapted": [], "lexical": []}
        for seed in range(seeds):
            order = list(range(len(rows)))
            random.Random(seed).shuffle(order)
            tr, te = order[:k], order[k : k + test]
            y_te = [labels[i] for i in te]
            try:
                fit = fit_combiner([feats[i] for i in tr], [labels[i] for i in tr], seed=seed)
            except Exception as exc:  # too few of one label in k rows
                print(f"  {path.stem} k={k} seed={seed}: {exc}", file=sys.stderr)
                continue
            ad = Adapter.from_dict({**fit, "version": 1, "verifier": "x"})
            pred = [int(ad.p_hallucinated(feats[i]) > ad.threshold) for i in te]
            res["adapted"].append(balanced_accuracy(y_te, pred))
            res["zero"].append(balanced_accuracy(y_te, [zero[i] for i in te]))
            res["lexical"].append(balanced_accuracy(y_te, [lexp[i] for i in te]))
        out[f"k{k}"] = {
            name: (statistics.mean(v), statistics.pstdev(v), len(v)) for name, v in res.items() if v
        }
    return out


def table(results: list[dict[str, Any]], ks: list[int], header: str) -> str:
    lines = [header, ""]
    lines.append(f"{'file':24} {'k':>4} {'zero-shot':>14} {'adapted':>14} {'lexical':>14}  n_seeds")
    for r in results:
        for k in ks:
            cell = r.get(f"k{k}", {})
            if "adapted" not in cell:
                continue

            def f(name: str, c: dict[str, Any] = cell) -> str:
                m, sd, _ = c[name]
                return f"{m:.3f} ± {sd:.3f}"

            lines.append(
                f"{r['file']:24} {k:>4} {f('zero'):>14} {f('adapted'):>14} {f('lexical'):>14}"
                f"  {cell['adapted'][2]}"
            )
    for k in ks:
        cells = [r[f"k{k}"] for r in results if "adapted" in r.get(f"k{k}", {})]
        if cells:
            mean = {
                n: statistics.mean(c[n][0] for c in cells) for n in ("zero", "adapted", "lexical")
            }
            lines.append(
                f"{'MEAN':24} {k:>4} {mean['zero']:>14.3f} {mean['adapted']:>14.3f} "
                f"{mean['lexical']:>14.3f}"
            )
    lines.append("")
    lines += [
        f"{r['file']}: pool {r['pool']} rows, {r['ms_per_row']:.0f} ms/row to verify"
        for r in results
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--ks", default="50,100,200")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--test", type=int, default=300)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    files = sorted((args.data / "eval").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    if args.only:
        files = [p for p in files if p.stem in args.only]
    results: list[dict[str, Any]] = []
    header = (
        f"k-shot adaptation, balanced accuracy on held-out rows (mean ± sd over {args.seeds} "
        f"seeds; test ≤ {args.test} rows; verifier 'default', context mode; "
        f"python -m bench.kshot --ks {args.ks} --seeds {args.seeds} --test {args.test})"
    )
    with build_guard(Settings(batch_window_ms=0)) as guard:
        for path in files:
            print(f"{path.name} …", file=sys.stderr, flush=True)
            results.append(run_file(path, ks, args.seeds, args.test, guard))
            text = table(results, ks, header)
            print(text, file=sys.stderr, flush=True)
            if args.out:
                args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
