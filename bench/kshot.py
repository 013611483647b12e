"""k-shot adaptation benchmark (issue 11): the tenant's adapter vs the zero-shot decision.

For each file in ``../shared/data/eval``: a seeded pool of rows (a prefix of the file's
shuffle, seed 1234) is verified once by the serve path
(:func:`groundproxy.proxy.offline.signals_of`: the row's context as request evidence, default
policy, no tenant index), giving the adapter's signals
(:mod:`groundproxy.guards.adapter.signals`), the zero-shot decision ("any claim not
supported") and the lexical baseline's score (the seed-001 method of ``bench/accuracy.py``,
threshold 0.5). The signals are cached on disk, outside the repository
(``~/.cache/groundproxy-bench/kshot/<file>-<content sha256>-<seed>-<code fingerprint>.json``,
one row saved at a time: a file named like another never reads its signals), so a stopped run
resumes, a smaller pool reuses a larger one's rows and the fits below re-run in seconds;
the fingerprint covers the code that produces the signals and the model files, not the
aggregation / fitting code.

``learned`` is the zero-shot learned answer-level decision (policy ``verifier.decision:
learned``: the default verifier's combiner shipped in ``models/<verifier>/answer-combiner.json``,
fitted on ``../shared/data/train`` only by ``training/answer_combiner.py``) on the same
test rows ("–" when it ships none).

Then per seed and k: k rows are the tenant's labels, the test rows are the others (at most
``--test``), and balanced accuracy is reported on the same test rows for zero-shot,
``adapted-v1`` (the adapter as first shipped: 17 features, C = 1), ``adapted`` (what
``calibrate --fit`` writes now: :func:`groundproxy.proxy.cli.adapt.fit_combiner`, feature set
and L2 strength chosen by cross-fitting on the k labels, cross-fitted balanced threshold —
or, when the whole fit's cross-fitted estimate does not beat the zero-shot decision on the
k labels, the zero-shot decision itself: "kept" counts those seeds) and lexical (mean ± sd
over seeds). ``--split train`` runs the same on ``../shared/data/train`` (to choose on).

    python -m bench.kshot --extract-only --pool 400          # fill the cache (slow)
    python -m bench.kshot --cached-only --pool 400 --out bench/results/kshot.txt
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.accuracy import lexical_scores
from bench.needs_data import SHARED, require
from groundproxy.errors import BadRequestError
from groundproxy.guards.adapter.combiner import read_adapter
from groundproxy.guards.adapter.features import LEGACY_FEATURES, features_from_signals
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.models.registry import DEFAULT_VERIFIER
from groundproxy.models.scoring import balanced_accuracy
from groundproxy.proxy.cli.adapt import Candidates, fit_combiner
from groundproxy.proxy.offline import eval_policy, signals_of, zero_shot_decision
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.adapters import SHIPPED, shipped_decision
from groundproxy.proxy.storage.feedback import parse_labelled
from training.signal_cache import CACHE, POOL_SEED, content_key, fingerprint

ROOT = Path(__file__).resolve().parents[1]
DATA = SHARED


def pool_rows(path: Path, size: int, seed: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    random.Random(seed).shuffle(rows)
    return rows[:size]


def _save(path: Path, content: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(content), encoding="utf-8")
    tmp.replace(path)


def extract(
    path: Path,
    pool: int,
    guard: Callable[[], GuardService] | None,
    cache_dir: Path = CACHE / "kshot",
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    """The pool's rows (a prefix of the file's seeded shuffle) and each row's served signals
    and zero-shot decision, read from / added to
    ``<cache_dir>/<file>-<content>-<seed>-<fingerprint>.json``
    (resumes where it stopped; a smaller pool reuses a larger one's prefix). ``guard`` None:
    cached rows only (the pool shrinks to what is cached)."""
    rows = pool_rows(path, pool, POOL_SEED)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # keyed by the file's content, not its name: a file named like another never reads its
    # signals (signal_cache.content_key)
    where = cache_dir / f"{path.stem}-{content_key(path)}-{POOL_SEED}-{fingerprint()}.json"
    saved: dict[str, Any] = {"file": path.stem, "rows": [], "seconds": 0.0}
    if where.exists():
        saved = json.loads(where.read_text(encoding="utf-8"))
    policy = eval_policy("default", "context")
    started = time.perf_counter() - saved["seconds"]
    todo = rows[len(saved["rows"]) :] if guard is not None else []
    for r in todo:
        assert guard is not None
        signals, zero = signals_of(parse_labelled(r), policy, guard())
        saved["rows"].append({"signals": signals, "zero": zero})
        saved["seconds"] = time.perf_counter() - started
        _save(where, saved)
        if len(saved["rows"]) % 10 == 0 or len(saved["rows"]) == len(rows):
            print(f"  {path.stem}: {len(saved['rows'])}/{len(rows)}", file=sys.stderr, flush=True)
    n = min(len(rows), len(saved["rows"]))
    per_row = saved["seconds"] / max(1, len(saved["rows"]))
    return rows[:n], [_served_zero(s) for s in saved["rows"][:n]], per_row


def _served_zero(row: dict[str, Any]) -> dict[str, Any]:
    """A cached row with its zero-shot decision as served (offline.zero_shot_decision):
    rows cached before said an answer with no claims was hallucinated."""
    claims = row["signals"]["claims"]
    zero = zero_shot_decision(len(claims), bool(int(row["zero"])))
    return {**row, "zero": zero}


# The adapter as first shipped (the 17 legacy features, C = 1) beside the current fit.
VARIANTS: dict[str, dict[str, Any]] = {
    "adapted-v1": {"candidates": Candidates({"legacy": LEGACY_FEATURES}, (1.0,))},
    "adapted": {},
}
COLUMNS = ("zero", "learned", "adapted-v1", "adapted", "lexical")


def run_file(
    path: Path,
    rows: list[dict[str, Any]],
    scored: list[dict[str, Any]],
    per_row_s: float,
    ks: list[int],
    seeds: int,
    test: int,
) -> dict[str, Any]:
    lex, _ = lexical_scores(rows, LexicalVerifier())
    labels = [int(r["label_hallucinated"]) for r in rows]
    feats = [features_from_signals(s["signals"]) for s in scored]
    zero = [int(s["zero"]) for s in scored]
    # zero-shot, learned on ../shared/data/train: the default verifier's shipped combiner
    shipped = shipped_decision(DEFAULT_VERIFIER) if DEFAULT_VERIFIER in SHIPPED else None
    learned = [int(shipped.p_hallucinated(f) > shipped.threshold) if shipped else 0 for f in feats]
    lexp = [int(p < 0.5) for p in lex]
    out: dict[str, Any] = {"file": path.stem, "pool": len(rows), "ms_per_row": 1000 * per_row_s}
    kept: dict[str, int] = {}  # per k: seeds whose fit kept the zero-shot decision
    out["kept_zero_shot"] = kept
    for k in ks:
        if len(rows) - k < 50:  # too few test rows left
            continue
        res: dict[str, list[float]] = {name: [] for name in COLUMNS}
        for seed in range(seeds):
            order = list(range(len(rows)))
            random.Random(seed).shuffle(order)
            tr, te = order[:k], order[k : k + test]
            y_te = [labels[i] for i in te]
            for name, options in VARIANTS.items():
                try:
                    fit = fit_combiner(
                        [feats[i] for i in tr],
                        [labels[i] for i in tr],
                        seed=seed,
                        zero=[zero[i] for i in tr] if name == "adapted" else None,
                        **options,
                    )
                except BadRequestError as exc:  # too few of one label in k rows
                    print(f"  {path.stem} k={k} seed={seed}: {exc}", file=sys.stderr)
                    continue
                ad = read_adapter({**fit, "version": 1, "verifier": "x"})
                if ad is None:  # the fit kept the zero-shot decision
                    kept[f"k{k}"] = kept.get(f"k{k}", 0) + 1
                    pred = [zero[i] for i in te]
                else:
                    pred = [int(ad.p_hallucinated(feats[i]) > ad.threshold) for i in te]
                res[name].append(balanced_accuracy(y_te, pred))
            res["zero"].append(balanced_accuracy(y_te, [zero[i] for i in te]))
            if shipped is not None:
                res["learned"].append(balanced_accuracy(y_te, [learned[i] for i in te]))
            res["lexical"].append(balanced_accuracy(y_te, [lexp[i] for i in te]))
        out[f"k{k}"] = {
            name: (statistics.mean(v), statistics.pstdev(v), len(v)) for name, v in res.items() if v
        }
    return out


def table(results: list[dict[str, Any]], ks: list[int], header: str) -> str:
    lines = [header, ""]
    heads = "".join(f"{'zero-shot' if c == 'zero' else c:>15}" for c in COLUMNS)
    lines.append(f"{'file':24} {'k':>4}{heads}  n_seeds (zero-shot kept)")
    for r in results:
        for k in ks:
            cell = r.get(f"k{k}", {})
            if "adapted" not in cell:
                continue

            def f(name: str, c: dict[str, Any] = cell) -> str:
                if name not in c:
                    return "–"
                m, sd, _ = c[name]
                return f"{m:.3f} ± {sd:.3f}"

            cols = "".join(f"{f(c):>15}" for c in COLUMNS)
            kept = r.get("kept_zero_shot", {}).get(f"k{k}", 0)
            lines.append(f"{r['file']:24} {k:>4}{cols}  {cell['adapted'][2]} (kept {kept})")
    for k in ks:
        cells = [r[f"k{k}"] for r in results if "adapted" in r.get(f"k{k}", {})]
        if cells:
            means = "".join(
                f"{statistics.mean(c[n][0] for c in cells):>15.3f}"
                if all(n in c for c in cells)
                else f"{'–':>15}"
                for n in COLUMNS
            )
            passed = sum(c["adapted"][0] >= 0.72 for c in cells)
            lines.append(f"{'MEAN':24} {k:>4}{means}  (adapted ≥ 0.72 on {passed}/{len(cells)})")
    lines.append("")
    lines += [
        f"{r['file']}: pool {r['pool']} rows, {r['ms_per_row']:.0f} ms/row to verify"
        for r in results
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument(
        "--split",
        choices=("eval", "train"),
        default="eval",
        help="train: the same on ../shared/data/train (to choose on; rows the verifier was "
        "trained on included)",
    )
    ap.add_argument("--ks", default="50,100,200")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--test", type=int, default=200)
    ap.add_argument("--pool", type=int, default=400)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--extract-only", action="store_true", help="fill the signal cache only")
    ap.add_argument(
        "--cached-only",
        action="store_true",
        help="verify nothing: each file's pool is what is cached",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    require(args.data)
    ks = [int(k) for k in args.ks.split(",")]
    files = sorted((args.data / args.split).glob("*.jsonl"), key=lambda p: p.stat().st_size)
    cache_dir = CACHE / ("kshot" if args.split == "eval" else "kshot-train")
    if args.only:
        files = sorted(
            (p for p in files if p.stem in args.only), key=lambda p: args.only.index(p.stem)
        )
    results: list[dict[str, Any]] = []
    header = (
        f"k-shot adaptation, balanced accuracy on held-out rows (mean ± sd over {args.seeds} "
        f"seeds; pool {args.pool}, test ≤ {args.test} rows; verifier 'default', context mode; "
        f"python -m bench.kshot --split {args.split} --ks {args.ks} --seeds {args.seeds} "
        f"--test {args.test})"
    )
    with contextlib.ExitStack() as stack:
        guards: list[GuardService] = []

        def guard() -> GuardService:
            if not guards:
                guards.append(stack.enter_context(build_guard(Settings(batch_window_ms=0))))
            return guards[0]

        for path in files:
            print(f"{path.name} …", file=sys.stderr, flush=True)
            rows, scored, secs = extract(
                path, args.pool, None if args.cached_only else guard, cache_dir
            )
            if args.extract_only:
                continue
            results.append(run_file(path, rows, scored, secs, ks, args.seeds, args.test))
            text = table(results, ks, header)
            print(text, file=sys.stderr, flush=True)
            if args.out:
                args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
