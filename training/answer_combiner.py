"""Learn the zero-shot answer-level decision from TRAIN data (issue 11: "answer-level
aggregation learned, not 'any claim'").

Step 1 (slow, resumable): every train file's seeded pool of rows is verified by the serve
path exactly as ``bench/kshot.py`` does for eval rows
(:func:`groundproxy.proxy.offline.signals_of`:
the row's context as request evidence, default policy), in rounds of ``--round`` rows per
file so a stopped run leaves every file about equally covered. Signals are cached outside the
repository (``~/.cache/groundproxy-bench/train-signals/``).

    nice -n 5 .venv/bin/python -m training.answer_combiner --extract [--minutes M]

Step 2 (seconds): a logistic combiner over the adapter's named features
(:mod:`groundproxy.guards.adapter.features`) is fitted on every cached train row, each file
weighed equally and each class equally within it; the feature set, the L2 strength and the
threshold are chosen by leave-one-train-file-out mean per-file balanced accuracy (ties: mean
ROC-AUC); no eval row is seen. The result is written in the adapter format to
``models/<verifier>/answer-combiner.json`` (``--verifier``: embedhead, crossencoder; the
decision served under the policy's
``verifier.decision: learned``).

    .venv/bin/python -m training.answer_combiner --fit
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from training.signal_cache import CACHE, POOL_SEED, fingerprint

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
# the rows each shipped verifier was trained on: its training_rows with this cap per file
# (embedhead: 1,500 a file; the cross-encoder: every row) — the pools keep clear of them
CAPS: dict[str, int] = {"embedhead": 1500, "crossencoder": 10**9}


def out_path(verifier: str) -> Path:
    return ROOT / "models" / verifier / "answer-combiner.json"


# Rows verified per train file (2 cores: ~0.2-1 s a row with a long context, ~0.05 s short).
POOLS: dict[str, int] = {
    "fever-nli": 600,
    "fever-symmetric": 224,  # every out-of-sample row (28; see pool())
    "fm2": 600,
    "halueval-qa": 600,
    "halueval-dialogue": 600,
    "faithdial": 307,  # all
    "begin-dev-tc-cmu": 79,  # all
    "clinifact": 400,
    "frank": 380,  # all
    "halueval-summarization": 400,
    "summedits": 215,  # all
    # WiCE: none — its 3 + 1 out-of-sample rows are too few (oracle and article share claims)
}
Matrix = npt.NDArray[np.float64]
C_GRID = (0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 1.0)  # L2 strengths tried (smaller: stronger)
SHARED_CLAIMS = ("wice-oracle", "wice-article", "fever-nli", "fever-symmetric")


def cache_dir() -> Path:
    return CACHE / "train-signals"


@functools.cache
def train_rows(data: Path, stem: str) -> tuple[dict[str, Any], ...]:
    """Every row of one train file (read once per run)."""
    from training.prepare import read_jsonl

    return tuple(read_jsonl(data / "train" / f"{stem}.jsonl"))


@functools.cache
def seen_claims(data: Path, verifier: str = "embedhead") -> frozenset[str]:
    """The responses the verifier was trained on in the files that share claims: WiCE
    oracle and article rows share claims (with other evidence), FEVER-Symmetric shares
    claims with FEVER-NLI — there a row whose claim was trained on with other evidence is
    in-sample too (train WiCE read ROC-AUC 0.99 without this)."""
    from training.prepare import training_rows

    cap = CAPS[verifier]
    rows = (r for stem in SHARED_CLAIMS for r in training_rows(train_rows(data, stem), stem, cap))
    return frozenset(str(r.get("response") or "") for r in rows)


@functools.cache
def pool(data: Path, stem: str, verifier: str = "embedhead") -> tuple[dict[str, Any], ...]:
    """The file's out-of-sample rows (context never seen by the verifier's training), in a
    seeded order, at most ``POOLS[stem]``: a combiner fitted on the verifier's in-sample
    scores would learn to trust them far too much (train WiCE: ROC-AUC 0.99 in-sample)."""
    from training.prepare import training_rows

    # contexts the verifier was trained on (their synthetic pairs were made from them too;
    # the shipped verifier was prepared with prepare's default --cap and --val-frac)
    trained = training_rows(train_rows(data, stem), stem, CAPS[verifier])
    seen = {str(r.get("context") or "") for r in trained}
    claims = seen_claims(data, verifier)
    rows = [
        r
        for r in train_rows(data, stem)
        if r["context"] not in seen and (stem not in SHARED_CLAIMS or r["response"] not in claims)
    ]
    random.Random(POOL_SEED).shuffle(rows)
    return tuple(rows[: POOLS[stem]])


def _cache_file(stem: str, verifier: str) -> Path:
    name = "" if verifier == "embedhead" else f"{verifier}-"  # embedhead: the earlier names
    return cache_dir() / f"{stem}-oos-{name}{fingerprint()}.json"


def _load(stem: str, verifier: str) -> dict[str, Any]:
    where = _cache_file(stem, verifier)
    if where.exists():
        loaded: dict[str, Any] = json.loads(where.read_text(encoding="utf-8"))
        return loaded
    return {"file": stem, "by_id": {}, "seconds": 0.0}


def _save(stem: str, saved: dict[str, Any], verifier: str) -> None:
    where = _cache_file(stem, verifier)
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp = where.with_suffix(".tmp")
    tmp.write_text(json.dumps(saved), encoding="utf-8")
    tmp.replace(where)


def extract(data: Path, step: int, minutes: float, verifier: str = "embedhead") -> None:
    """Verify every file's pool by the serve path, ``step`` rows per file per round
    (resumable: rows are cached by id)."""
    from groundproxy.proxy.offline import (
        Settings,
        build_guard,
        eval_policy,
        parse_labelled,
        signals_of,
    )

    deadline = time.monotonic() + 60 * minutes
    policy = eval_policy(verifier, "context")
    pools = {stem: pool(data, stem, verifier) for stem in POOLS}
    with build_guard(Settings(batch_window_ms=0)) as guard:
        size = step
        while size < max(POOLS.values()) + step and time.monotonic() < deadline:
            for stem, rows in pools.items():
                saved = _load(stem, verifier)
                todo = [r for r in rows[:size] if r["id"] not in saved["by_id"]]
                for r in todo:
                    if time.monotonic() >= deadline:
                        break
                    t = time.perf_counter()
                    signals, zero = signals_of(parse_labelled(r), policy, guard)
                    saved["by_id"][r["id"]] = {"signals": signals, "zero": zero}
                    saved["seconds"] += time.perf_counter() - t
                if todo:
                    _save(stem, saved, verifier)
                    done = sum(r["id"] in saved["by_id"] for r in rows)
                    print(f"  {stem}: {done}/{len(rows)}", file=sys.stderr)
            size += step


def cached(
    data: Path, verifier: str = "embedhead"
) -> dict[str, tuple[list[int], list[dict[str, Any]]]]:
    """file → (labels, signal rows) for every cached pool row (no verification)."""
    out = {}
    for stem in POOLS:
        by_id = _load(stem, verifier)["by_id"]
        rows = [r for r in pool(data, stem, verifier) if r["id"] in by_id]
        if rows:
            out[stem] = (
                [int(r["label_hallucinated"]) for r in rows],
                [by_id[r["id"]] for r in rows],
            )
    return out


def file_class_weights(groups: Sequence[str], y: npt.NDArray[np.int64]) -> Matrix:
    """Each file weighs the same in all; within a file each class weighs the same."""
    w = np.zeros(len(y))
    files = sorted(set(groups))
    g = np.asarray(groups)
    for f in files:
        for label in (0, 1):
            m = (g == f) & (y == label)
            if m.any():
                w[m] = 1.0 / (len(files) * 2 * m.sum())
    return w * len(y)


def fit_logistic(
    x: Matrix, y: npt.NDArray[np.int64], w: Matrix, c: float
) -> tuple[Matrix, Matrix, Any]:
    from sklearn.linear_model import LogisticRegression

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 1e-6, scale, 1.0)
    m = LogisticRegression(C=c, max_iter=5000)
    m.fit((x - mean) / scale, y, sample_weight=w)
    return mean, scale, m


def fit(data: Path, out: Path, verifier: str = "embedhead") -> dict[str, Any]:
    from sklearn.metrics import roc_auc_score

    from groundproxy.guards import FEATURE_SETS, features_from_signals
    from groundproxy.models.scoring import balanced_accuracy

    per_file = cached(data, verifier)
    groups: list[str] = []
    feats: list[Mapping[str, float]] = []
    labels: list[int] = []
    for stem, (ys, scored) in per_file.items():
        groups += [stem] * len(ys)
        labels += ys
        feats += [features_from_signals(s["signals"]) for s in scored]
    if len(per_file) < 3:
        raise SystemExit(
            f"cached train signals for {len(per_file)} files under {cache_dir()} (code "
            f"fingerprint {fingerprint()}): run --extract first (or pin an earlier one with "
            "GROUNDPROXY_BENCH_FINGERPRINT if the signal code did not change)"
        )
    y = np.asarray(labels, dtype=np.int64)
    g = np.asarray(groups)
    files = sorted(set(groups))
    print(f"{len(y)} train rows from {len(files)} files", file=sys.stderr)

    def mean_bacc(oof: Matrix, t: float) -> float:
        return float(
            np.mean(
                [balanced_accuracy(y[g == f].tolist(), (oof[g == f] > t).tolist()) for f in files]
            )
        )

    # Each candidate (feature set, C): out-of-file P(hallucinated) for every train file
    # (leave one file out), the threshold with the best mean per-file balanced accuracy on
    # them; the candidate deciding best that way wins (ties: the better mean ROC-AUC).
    best: tuple[float, float, float, float, str, Matrix] | None = None
    for set_name, names in FEATURE_SETS.items():
        x = np.asarray([[f[n] for n in names] for f in feats], dtype=np.float64)
        for c in C_GRID:
            oof = np.zeros(len(y))
            for f in files:  # leave one train file out
                te = g == f
                mean, scale, m = fit_logistic(
                    x[~te], y[~te], file_class_weights(g[~te].tolist(), y[~te]), c
                )
                oof[te] = m.predict_proba((x[te] - mean) / scale)[:, 1]
            auc = float(np.mean([roc_auc_score(y[g == f], oof[g == f]) for f in files]))
            cuts: list[float] = np.unique(np.round(oof, 3)).tolist()
            cut = max(cuts, key=functools.partial(mean_bacc, oof))
            bacc = mean_bacc(oof, cut)
            print(f"  {set_name:11} C={c:<6} out-of-file mean bal.acc {bacc:.4f} ROC-AUC {auc:.4f}")
            key = (round(bacc, 4), round(auc, 4))
            if best is None or key > (best[0], best[1]):
                best = (key[0], key[1], c, cut, set_name, oof)
    assert best is not None
    bacc, auc, c, threshold, set_name, oof = best
    names = FEATURE_SETS[set_name]
    per = {
        f: {
            "n": int((g == f).sum()),
            "roc_auc": round(roc_auc_score(y[g == f], oof[g == f]), 4),
            "balanced_accuracy": round(
                balanced_accuracy(y[g == f].tolist(), (oof[g == f] > threshold).tolist()), 4
            ),
        }
        for f in files
    }
    x = np.asarray([[f[n] for n in names] for f in feats], dtype=np.float64)
    mean, scale, m = fit_logistic(x, y, file_class_weights(groups, y), c)
    content = {
        "object": "groundproxy.adapter",
        "version": 1,
        "source": "shipped",
        "verifier": verifier,
        "features": list(names),
        "mean": [float(v) for v in mean],
        "scale": [float(v) for v in scale],
        "coef": [float(v) for v in m.coef_[0]],
        "intercept": float(m.intercept_[0]),
        "threshold": float(threshold),
        "fit": {
            "data": "../shared/data/train (seeded pools, training.answer_combiner.POOLS)",
            "n": len(y),
            "feature_set": set_name,
            "C": c,
            "threshold_rule": "mean per-file balanced accuracy, leave-one-train-file-out",
            "leave_one_file_out": per,
            "mean_roc_auc": round(auc, 4),
            "mean_balanced_accuracy": round(bacc, 4),
        },
    }
    out.write_text(json.dumps(content, indent=1) + "\n", encoding="utf-8")
    return content


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--extract", action="store_true")
    ap.add_argument("--minutes", type=float, default=600.0)
    ap.add_argument("--round", type=int, default=20)
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--verifier", default="embedhead", choices=sorted(CAPS))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.extract:
        extract(args.data, args.round, args.minutes, args.verifier)
    if args.fit:
        content = fit(args.data, args.out or out_path(args.verifier), args.verifier)
        print(json.dumps(content["fit"], indent=1))


if __name__ == "__main__":
    main()
