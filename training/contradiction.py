"""Fit a shipped verifier's contradiction bar on held-out TRAIN contexts; write it beside it.

    nice -n 10 .venv/bin/python -m training.contradiction [--work /tmp/gp-embedhead]
        [--model-dir models/embedhead] [--max-false-rate 0.005]
    nice -n 10 .venv/bin/python -m training.contradiction --built models/crossencoder

``--built DIR``: a built verifier (``groundproxy models build``, e.g. the shipped
``crossencoder``): its validation pairs are the same held-out TRAIN contexts
(:func:`training.prepare.collect_examples` with every row, as the cross-encoder was
trained: rows, their sentences and the synthetic pairs of the split), scored by the
shipped int8 file through :class:`~groundproxy.models.built_verifier.BuiltVerifier` (the
evidence windowed as at serve time); the bar goes to its ``build.json``
(``contradiction_min``, ``validation.contradiction``). The grid then runs to 0.999: the
cross-encoder puts most "not supported" mass on contradiction (a claim its evidence only
fails to cover reads P(contradicted) ≈ 0.97).

Why: under the default policy a ``contradicted`` claim is rewritten (corrected or removed),
so a false contradiction changes a right answer. The head's P(contradicted) is weak at the
top of its range: with the plain rule "P(contradicted) ≥ 0.5 and > P(unverifiable)", 16 %
of the SUPPORTED validation rows came out contradicted (48 % on Fool Me Twice, 17 % on
HaluEval summaries), while only 45 % of the truly contradicted ones did. Contradictions
the guard can explain come from its symbolic rules (numbers, dates, units, names), which
this bar does not touch.

What: the lowest bar ``b`` on P(contradicted) (grid 0.50 … 0.99) at which, over the
validation split written by ``training.prepare`` (contexts never seen in training, every
source, labelled and synthetic rows, whole responses and their sentences), at most
``--max-false-rate`` of the supported rows would be called contradicted. P(supported) is
untouched, so every ROC-AUC / balanced-accuracy figure of the head stays as it was; a
claim above the supported threshold is still supported, one below the bar and the
threshold is ``unverifiable`` (flagged by default) instead of rewritten.

The figures (false rate per source, recall of the truly contradicted rows at the bar and at
0.5) go to meta.json beside the bar (``contradiction_min``, ``validation.contradiction``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.models.embedhead_verifier import MODEL_DIR, load_meta
from training.onnx_head import run_onnx

Arr = npt.NDArray[Any]
GRID = np.round(np.arange(0.50, 0.995, 0.01), 2)
FINE_GRID = np.concatenate([GRID, np.round(np.arange(0.991, 0.9995, 0.001), 3)])


def called_contradicted(probs: Arr, bar: float) -> Arr:
    """The decide rule for the model alone: P(con) ≥ bar and P(con) > P(unverifiable)."""
    result: Arr = (probs[:, 1] >= bar) & (probs[:, 1] > probs[:, 2])
    return result


def fit_bar(probs: Arr, supported: Arr, max_false_rate: float, grid: Arr = GRID) -> float:
    """Lowest grid bar whose false-contradiction rate on ``supported`` rows is ≤ the limit."""
    for bar in grid:
        if called_contradicted(probs[supported], float(bar)).mean() <= max_false_rate:
            return float(bar)
    return float(grid[-1])


def report(
    probs: Arr, sources: Arr, supported: Arr, contradicted: Arr, bar: float
) -> dict[str, Any]:
    per_source = {
        str(s): round(float(called_contradicted(probs[supported & (sources == s)], bar).mean()), 4)
        for s in sorted(set(sources[supported].tolist()))
    }
    return {
        "bar": bar,
        "false_rate_pooled": round(float(called_contradicted(probs[supported], bar).mean()), 4),
        "false_rate_per_source": per_source,
        "recall_contradicted": round(
            float(called_contradicted(probs[contradicted], bar).mean()), 4
        ),
        "n_supported": int(supported.sum()),
        "n_contradicted": int(contradicted.sum()),
    }


def fit_built(
    model_dir: Path, data: Path, max_false_rate: float, per_source: int = 300
) -> dict[str, Any]:
    """The bar of a built verifier over the held-out TRAIN pairs (module docstring; at most
    ``per_source`` of each source, seeded)."""
    from groundproxy.guards.types import Pair
    from groundproxy.models.built_verifier import BUILD_FILE, BuiltVerifier
    from training.prepare import collect_examples

    records, pairs, _ = collect_examples(data, cap=10**9)
    by_source: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        if r["split"] == "val":
            by_source.setdefault(str(r["source"]), []).append(i)
    rng = np.random.default_rng(0)  # a seeded sample of each source's validation pairs
    val = sorted(
        i
        for ids in by_source.values()
        for i in (rng.choice(ids, per_source, replace=False) if len(ids) > per_source else ids)
    )
    verifier = BuiltVerifier(model_dir, "int8")
    probs = np.asarray(
        [
            [p.supported, p.contradicted, p.unverifiable]
            for p in verifier.score([Pair(pairs[i][0], pairs[i][1]) for i in val])
        ]
    )
    sources = np.array([records[i]["source"] for i in val])
    supported = np.array([records[i]["hallucinated"] == 0 for i in val])
    contradicted = np.array([records[i]["target"] == 1 for i in val])
    bar = fit_bar(probs, supported, max_false_rate, FINE_GRID)
    figures = {
        "max_false_rate": max_false_rate,
        "pairs": len(val),
        "per_source": per_source,
        "at_bar": report(probs, sources, supported, contradicted, bar),
        "at_0.5": report(probs, sources, supported, contradicted, 0.5),
    }
    build = json.loads((model_dir / BUILD_FILE).read_text(encoding="utf-8"))
    build["contradiction_min"] = bar
    build["contradiction_note"] = _note(max_false_rate)
    build.setdefault("validation", {})["contradiction"] = figures
    (model_dir / BUILD_FILE).write_text(json.dumps(build, indent=2) + "\n", encoding="utf-8")
    return figures


def _note(max_false_rate: float) -> str:
    return (
        "a claim is contradicted by the model only when P(contradicted) >= this bar (and > "
        "P(unverifiable)); fitted by training.contradiction so that at most "
        f"{max_false_rate:.1%} of supported held-out TRAIN rows are called contradicted"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/gp-embedhead"))
    ap.add_argument("--model-dir", type=Path, default=MODEL_DIR)
    ap.add_argument("--built", type=Path, default=None, help="a built verifier's folder")
    ap.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
    ap.add_argument("--max-false-rate", type=float, default=0.005)
    ap.add_argument("--per-source", type=int, default=300, help="--built: pairs per source")
    args = ap.parse_args()
    if args.built is not None:
        figures = fit_built(args.built, args.data, args.max_false_rate, args.per_source)
        print(json.dumps(figures, indent=1))
        return
    feats = np.load(args.work / "features.npy")
    rows = [json.loads(line) for line in (args.work / "meta.jsonl").open(encoding="utf-8")]
    meta = load_meta(args.model_dir)
    val = np.array([r["split"] == "val" for r in rows])
    sources = np.array([r["source"] for r in rows])[val]
    supported = np.array([r["hallucinated"] == 0 for r in rows])[val]
    contradicted = np.array([r["target"] == 1 for r in rows])[val]
    # the shipped int8 file: the bar is fitted on exactly what the proxy runs
    x = feats[val].astype(np.float32)
    probs = np.concatenate(
        [run_onnx(args.model_dir / meta["files"]["int8"], x[i : i + 1]) for i in range(len(x))]
    )
    bar = fit_bar(probs, supported, args.max_false_rate)
    figures = {
        "max_false_rate": args.max_false_rate,
        "at_bar": report(probs, sources, supported, contradicted, bar),
        "at_0.5": report(probs, sources, supported, contradicted, 0.5),
    }
    meta["contradiction_min"] = bar
    meta["contradiction_note"] = _note(args.max_false_rate)
    meta.setdefault("validation", {})["contradiction"] = figures
    (args.model_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
