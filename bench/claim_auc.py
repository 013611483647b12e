"""Claim-level ROC-AUC on the eval files (issue 11's goal: ≥ 0.80 on each).

The eval files label whole responses, not claims. A claim's label is known where the
response IS one claim: the rows whose response the guard splits into exactly one claim (the
claim's label is the row's). On those rows, per file: the ROC-AUC of the served claim score
``1 − P(supported)`` (after the symbolic rules and the evidence floor), of the verifier's
raw ``1 − P(supported)`` (best over the claim's passages), of ``1 − token alignment``
(the mean best cosine of the claim's content word pieces, :mod:`models.token_alignment`: a
signal the adapters read, not the served claim score) and of the lexical baseline (seed-001
TF-IDF, on the same rows, the same run). Beside them, on every row of the pool:
the answer-level ROC-AUC of ``1 − min P(supported)`` over the answer's claims and of
``1 − trust``.

``combiner``: what a claim-level score learned on train data would give — a logistic
combiner of the verifier's raw P(supported) and P(contradicted) and the three token
alignment fields, fitted (each train file weighing the same) on the single-claim rows of
the answer combiner's out-of-sample train pools (:mod:`training.answer_combiner`'s
cache; no eval row), scored on the same eval rows. Not served: a probe of the next step.

The rows and their signals are the ``bench.kshot`` pools (400 seeded rows per file, seed
1234, the row's context as request evidence, default policy), read from its cache — run
``python -m bench.kshot --extract-only`` first (or pin a cached code fingerprint with
``GROUNDPROXY_BENCH_FINGERPRINT``; the figures are then those of that code).

    python -m bench.claim_auc [--pool 400] [--out bench/results/claim_auc.txt]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from bench.accuracy import lexical_scores
from bench.kshot import DATA, extract, fingerprint
from bench.needs_data import require
from groundproxy.guards.adapter.signals import CLAIM_FIELDS
from groundproxy.guards.verdict.lexical import LexicalVerifier

P_SUPPORTED = CLAIM_FIELDS.index("p_supported")
RAW_SUPPORTED = CLAIM_FIELDS.index("raw_supported")
TOK_MEAN = CLAIM_FIELDS.index("tok_mean")
GOAL = 0.80


def _auc(labels: list[int], scores: list[float]) -> float | None:
    """ROC-AUC, or None when the rows hold one label only."""
    return float(roc_auc_score(labels, scores)) if len(set(labels)) == 2 else None


COMBINED = ("raw_supported", "raw_contradicted", "tok_mean", "tok_min", "tok_low")


def claim_combiner() -> Callable[[list[list[float]]], list[float]] | None:
    """P(hallucinated) of single claims (their CLAIM_FIELDS rows) from a logistic combiner
    fitted with the answer combiner's ``fit_logistic`` on the train pools' single-claim rows,
    each train file weighing the same (the classes within a file are not reweighed, unlike
    the answer combiner's ``file_class_weights``); None when those are not cached."""
    from training.answer_combiner import DATA as TRAIN_DATA
    from training.answer_combiner import cached, fit_logistic

    cols = [CLAIM_FIELDS.index(n) for n in COMBINED]
    x: list[list[float]] = []
    y: list[int] = []
    w: list[float] = []
    for labels, scored in cached(TRAIN_DATA).values():
        one = [(lab, s["signals"]["claims"][0]) for lab, s in zip(labels, scored, strict=True)
               if len(s["signals"]["claims"]) == 1]  # fmt: skip
        x += [[c[i] for i in cols] for _, c in one]
        y += [lab for lab, _ in one]
        w += [1.0 / max(1, len(one))] * len(one)
    if len(set(y)) < 2:
        return None
    weights = np.asarray(w) * len(w) / sum(w)
    mean, scale, model = fit_logistic(np.asarray(x), np.asarray(y, dtype=np.int64), weights, 0.1)

    def score(claims: list[list[float]]) -> list[float]:
        rows = (np.asarray([[c[i] for i in cols] for c in claims]) - mean) / scale
        return [float(p) for p in model.predict_proba(rows)[:, 1]]

    return score


def file_figures(
    rows: list[dict[str, Any]],
    scored: list[dict[str, Any]],
    combiner: Callable[[list[list[float]]], list[float]] | None = None,
) -> dict[str, Any]:
    labels = [int(r["label_hallucinated"]) for r in rows]
    claims = [s["signals"]["claims"] for s in scored]
    lex, _ = lexical_scores(rows, LexicalVerifier())
    one = [i for i, c in enumerate(claims) if len(c) == 1]
    y1 = [labels[i] for i in one]
    with_claims = [i for i, c in enumerate(claims) if c]
    y = [labels[i] for i in with_claims]
    return {
        "n": len(rows),
        "n_single": len(one),
        "hallucinated_single": sum(y1),
        "claim_served": _auc(y1, [1 - claims[i][0][P_SUPPORTED] for i in one]),
        "claim_raw": _auc(y1, [1 - claims[i][0][RAW_SUPPORTED] for i in one]),
        "claim_tokens": _auc(y1, [1 - claims[i][0][TOK_MEAN] for i in one]),
        "claim_combiner": _auc(y1, combiner([claims[i][0] for i in one]))
        if combiner and one
        else None,
        "claim_lexical": _auc(y1, [1 - float(lex[i]) for i in one]),
        "answer_min": _auc(y, [1 - min(c[P_SUPPORTED] for c in claims[i]) for i in with_claims]),
        "answer_trust": _auc(y, [1 - scored[i]["signals"]["trust"] for i in with_claims]),
    }


def table(results: dict[str, dict[str, Any]], pool: int) -> str:
    def cell(v: float | None) -> str:
        return f"{v:>9.3f}" if v is not None else f"{'—':>9}"

    lines = [
        f"claim-level ROC-AUC (rows whose response is one claim; goal ≥ {GOAL}) and answer-level "
        f"ROC-AUC (all rows); bench.kshot pools of {pool} seeded rows, context mode, default "
        f"policy, signals of code fingerprint {fingerprint()}",
        "",
        f"{'file':24}{'rows':>6}{'1-claim':>9}{'hal.':>6} │{'served':>9}{'raw':>9}"
        f"{'tokens':>9}{'combiner':>9}{'lexical':>9} │{'min p':>9}{'1-trust':>9}",
    ]
    keys = (
        "claim_served",
        "claim_raw",
        "claim_tokens",
        "claim_combiner",
        "claim_lexical",
        "answer_min",
        "answer_trust",
    )
    for name, r in results.items():
        cells = [cell(r[k]) for k in keys]
        lines.append(
            f"{name:24}{r['n']:>6}{r['n_single']:>9}{r['hallucinated_single']:>6} │"
            f"{''.join(cells[:5])} │{''.join(cells[5:])}"
        )

    def mean(key: str) -> float | None:
        values = [r[key] for r in results.values()]
        return None if None in values else statistics.mean(values)

    served = [r["claim_served"] for r in results.values() if r["claim_served"] is not None]
    met = sum(v >= GOAL for v in served)
    means = "".join(cell(mean(k)) for k in keys)
    lines.append(
        f"{'MEAN':47}│{means[: 9 * 5]} │{means[9 * 5 :]}   (served ≥ {GOAL} on {met}/{len(served)})"
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--pool", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    require(args.data)
    results: dict[str, dict[str, Any]] = {}
    combiner = claim_combiner()
    for path in sorted((args.data / "eval").glob("*.jsonl")):
        rows, scored, _ = extract(path, args.pool, None)  # the cache only
        if rows:
            results[path.stem] = file_figures(rows, scored, combiner)
    if not results:
        raise SystemExit(f"no cached bench.kshot signals for fingerprint {fingerprint()}")
    text = table(results, args.pool)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
