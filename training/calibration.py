"""Fit a verifier's calibration of its raw P(supported) (issue 42 item 3) on held-out TRAIN
rows; write ``models/<verifier>/calibration.json`` (the served uncertainty then becomes the
calibrated P(the verdict is wrong): :class:`groundproxy.guards.verdict.uncertainty.Calibration`).

    .venv/bin/python -m training.calibration --verifier crossencoder [--rows 50]
        [--method threshold|platt] [--balanced] [--data ../shared/data] [--out FILE]

No verifier ships one: on held-out train rows the calibrated P(wrong) ranks the verifiers'
errors worse than the decision margin (``python -m bench.calibration``; figures in
``bench/results/calibration-train.txt``). Writing the file is the opt-in — and the judge's
``min_uncertainty`` then reads that scale (under ``threshold`` P(wrong) is at most 1/2).

Rows: of each train file, the rows whose context neither shipped verifier trained on (the
prepare step's held-out split, :func:`training.prepare.in_validation`; in the
files that share claims, the rows whose claim was not trained on with other evidence either),
in a seeded order, at most ``--rows`` a file (the rows ``bench.calibration`` reads). Each
row's answer goes through stage 1 by the serve path (the row's context as request evidence,
the verifier alone, no ladder); what each claim needs is cached per file
(``~/.cache/groundproxy-bench/calibration/``, keyed by the file's content and the verifier),
so a rerun only fits.

A claim's label is known where its answer is labelled supported (every claim of it is) or is
one claim. The claims fitted on are the verifier's to decide: they have evidence and no value
rule contradicted them. ``y`` = the claim is supported, ``x = logit(raw P(supported))``; a
logistic fit of ``y`` on ``x`` (each train file weighing the same; with ``--balanced`` each
class too, within a file) gives ``a`` and ``b`` (``platt``), or on ``x − logit(τ)`` with no
intercept gives ``a`` (``threshold``, the default: temperature about the verifier's
threshold τ — the recipe that ranked best on train). The file records, leave one train file
out, the expected calibration error (10 bins) of the raw and calibrated P(supported).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.guards import CAL_EPS, CAL_METHODS, Calibration, Verified
from training.signal_cache import CACHE, POOL_SEED, content_key

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
SHARED_CLAIMS = ("wice-oracle", "wice-article", "fever-nli", "fever-symmetric")
C = 100.0  # the logistic fit's inverse L2 strength: all but unpenalized
BINS = 10
Vector = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ClaimRow:
    """One decided claim with a known label: its file, raw P(supported), truth."""

    file: str
    raw: float
    supported: bool


def held_out(path: Path, n: int) -> list[dict[str, Any]]:
    """The file's rows neither shipped verifier trained on, seeded order, at most ``n``."""
    from training.prepare import in_validation, training_rows

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    seen = {str(r.get("response") or "") for r in training_rows(rows, path.stem, cap=10**9)}
    rows = [
        r
        for r in rows
        if in_validation(str(r.get("context") or ""))
        and (path.stem not in SHARED_CLAIMS or str(r.get("response") or "") not in seen)
    ]
    random.Random(POOL_SEED).shuffle(rows)
    return rows[:n]


def labelled_claims(file: str, label: int, claims: Sequence[tuple[float, bool]]) -> list[ClaimRow]:
    """The claims of one answer (``label``: 1 hallucinated) whose label is known, of those
    the verifier decides (``(raw P(supported), decided by the verifier)`` each)."""
    if label == 1 and len(claims) != 1:
        return []  # which of its claims is wrong is unknown
    return [ClaimRow(file, raw, label == 0) for raw, mine in claims if mine]


def decided(v: Verified) -> list[tuple[float, bool]]:
    """Each claim of stage 1's result: (the verifier's best raw P(supported) over its
    passages, whether the verifier decides it — it has evidence and no value rule
    contradicted it)."""
    return [
        (
            max((p.supported for p in s.probs), default=0.0),
            bool(s.evidence) and not s.rule.mismatches,
        )
        for s in v.claims
    ]


def extract(data: Path, verifier: str, n: int, cache: Path) -> list[ClaimRow]:
    """Every train file's held-out rows through stage 1 (cached per file)."""
    from groundproxy.proxy.offline import Settings, build_guard, eval_policy, parse_labelled

    policy = eval_policy(verifier, "context")
    policy = policy.model_copy(
        update={
            "verifier": policy.verifier.model_copy(
                update={"ladder": policy.verifier.ladder.model_copy(update={"strong": "none"})}
            )
        }
    )
    cache.mkdir(parents=True, exist_ok=True)
    out: list[ClaimRow] = []
    guard = None
    with contextlib.ExitStack() as stack:
        for path in sorted((data / "train").glob("*.jsonl")):
            where = cache / f"{verifier}-{path.stem}-{content_key(path)}.json"
            saved: dict[str, Any] = {}
            if where.exists():
                saved = json.loads(where.read_text(encoding="utf-8"))
            rows = held_out(path, n)
            for r in rows:
                if r["id"] in saved:
                    continue
                if guard is None:  # built only when a row is not cached
                    guard = stack.enter_context(build_guard(Settings(batch_window_ms=0)))
                item = parse_labelled(r)
                context = [("context", c) for c in item.context]
                v = guard.verify_sync(item.answer, item.question, context, policy, cache=False)
                saved[r["id"]] = decided(v)
                where.write_text(json.dumps(saved), encoding="utf-8")
            for r in rows:
                claims = [(float(raw), bool(mine)) for raw, mine in saved[r["id"]]]
                out += labelled_claims(path.stem, int(r["label_hallucinated"]), claims)
            print(f"  {path.stem}: {len(rows)} rows", file=sys.stderr)
    return out


def logit(p: Sequence[float]) -> Vector:
    q = np.clip(np.asarray(p, dtype=np.float64), CAL_EPS, 1.0 - CAL_EPS)
    return np.asarray(np.log(q / (1.0 - q)), dtype=np.float64)


def file_weights(files: Sequence[str], supported: Sequence[bool] | None = None) -> Vector:
    """Each file weighs the same in all; with ``supported``, each class the same within a
    file too (the weights sum to the number of rows)."""
    f = np.asarray(files)
    keys = f if supported is None else np.char.add(f, np.asarray(supported).astype(str))
    w = np.zeros(len(f))
    names = sorted(set(files))
    for name in names:
        m = f == name
        kinds = sorted(set(keys[m].tolist()))
        for k in kinds:
            km = keys == k
            w[km] = len(f) / (len(names) * len(kinds) * km.sum())
    return w


def fit_calibration(
    raw: Sequence[float], supported: Sequence[bool], weights: Vector, how: tuple[str, float]
) -> Calibration:
    """A weighted logistic fit of ``supported`` on ``logit(raw)`` (``how``: the method and,
    for ``threshold``, the verifier's threshold τ: on ``logit(raw) − logit(τ)``, no
    intercept); a nearly unpenalized fit (C = :data:`C`)."""
    from sklearn.linear_model import LogisticRegression

    method, tau = how
    x = logit(raw) - (logit([tau])[0] if method == "threshold" else 0.0)
    m = LogisticRegression(C=C, fit_intercept=method == "platt", max_iter=1000)
    m.fit(x[:, None], np.asarray(supported, dtype=np.int64), sample_weight=weights)
    a = max(float(m.coef_[0][0]), 1e-3)  # a file set where P(supported) ranks backwards
    b = float(m.intercept_[0]) if method == "platt" else 0.0
    return Calibration(a, b, method)


def ece(p: Sequence[float], supported: Sequence[bool], bins: int = BINS) -> float:
    """Expected calibration error of P(supported): the claims in ``bins`` equal-width bins,
    |mean p − share supported| weighted by the bin's share of claims."""
    pa = np.asarray(p, dtype=np.float64)
    ya = np.asarray(supported, dtype=np.float64)
    which = np.minimum((pa * bins).astype(int), bins - 1)
    total = 0.0
    for k in range(bins):
        m = which == k
        if m.any():
            total += m.mean() * abs(float(pa[m].mean()) - float(ya[m].mean()))
    return total


@dataclass(frozen=True)
class Recipe:
    """How a calibration is fitted: ``method`` (:data:`CAL_METHODS`), each class weighing
    the same within a file (``balanced``) or not, and the verifier's threshold ``tau``
    (what ``threshold`` is fitted about)."""

    method: str = "threshold"
    balanced: bool = False
    tau: float = 0.5


def fit_rows(rows: Sequence[ClaimRow], recipe: Recipe) -> Calibration:
    truth = [r.supported for r in rows]
    if len(set(truth)) < 2:
        raise SystemExit("too few labelled claims of both kinds to fit: use more --rows")
    files = [r.file for r in rows]
    weights = file_weights(files, truth if recipe.balanced else None)
    return fit_calibration([r.raw for r in rows], truth, weights, (recipe.method, recipe.tau))


def leave_one_file_out(rows: Sequence[ClaimRow], recipe: Recipe) -> dict[str, Calibration]:
    """Per train file, the calibration fitted on the other files' claims."""
    files = sorted({r.file for r in rows})
    if len(files) < 2:
        return {}
    return {f: fit_rows([r for r in rows if r.file != f], recipe) for f in files}


def fit(rows: Sequence[ClaimRow], verifier: str, n: int, recipe: Recipe) -> dict[str, Any]:
    cal = fit_rows(rows, recipe)
    held = leave_one_file_out(rows, recipe)
    kept = [r for r in rows if r.file in held]
    truth = [r.supported for r in kept]
    out_of_file = [held[r.file].p_supported(r.raw, recipe.tau) for r in kept]
    balanced = " --balanced" if recipe.balanced else ""
    return {
        "object": "groundproxy.calibration",
        "verifier": verifier,
        "method": cal.method,
        "a": round(cal.a, 6),
        "b": round(cal.b, 6),
        "fit": {
            "data": "../shared/data/train, held-out rows (training.calibration.held_out)",
            "rows_per_file": n,
            "threshold": recipe.tau,
            "balanced": recipe.balanced,
            "n_claims": len(rows),
            "n_files": len({r.file for r in rows}),
            "share_supported": round(statistics.mean(float(r.supported) for r in rows), 4),
            "ece_raw_leave_one_file_out": round(ece([r.raw for r in kept], truth), 4)
            if kept
            else None,
            "ece_calibrated_leave_one_file_out": round(ece(out_of_file, truth), 4)
            if kept
            else None,
            "command": f"python -m training.calibration --verifier {verifier} --rows {n} "
            f"--method {recipe.method}{balanced}",
        },
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--verifier", default="crossencoder")
    ap.add_argument("--rows", type=int, default=50, help="held-out rows per train file")
    ap.add_argument("--method", default=Recipe.method, choices=CAL_METHODS)
    ap.add_argument("--balanced", action="store_true", help="classes weigh the same per file")
    ap.add_argument("--data", type=Path, default=DATA, help="../shared/data")
    ap.add_argument("--cache", type=Path, default=CACHE / "calibration")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from groundproxy.guards import model_threshold, resolve_threshold
    from groundproxy.models.registry import VerifierRegistry
    from groundproxy.proxy.offline import eval_policy

    fitted = model_threshold(VerifierRegistry().get(args.verifier))
    tau = resolve_threshold(eval_policy(args.verifier, "context"), None, fitted)  # in force
    recipe = Recipe(args.method, args.balanced, tau)
    rows = extract(args.data, args.verifier, args.rows, args.cache)
    content = fit(rows, args.verifier, args.rows, recipe)
    out = args.out or ROOT / "models" / args.verifier / "calibration.json"
    out.write_text(json.dumps(content, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(content, indent=1))


if __name__ == "__main__":
    main()
