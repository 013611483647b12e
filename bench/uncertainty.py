"""Does the claims' ``uncertainty`` rank the verifier's own errors? (issue 29, item 5)

``ClaimResult.uncertainty`` (in [0, 1], higher = more likely wrong) is what an LLM judge's
escalation ranks claims by: the judge can only fix what it is sent. Per eval file:

- **answer level** (every row of the pool): the zero-shot decision ("any claim not
  supported") is wrong when it differs from the row's label; the answer's uncertainty is
  its most uncertain claim's (an answer without claims: 0). ROC-AUC of that uncertainty
  for the decision's errors (goal ≥ 0.70 on every file), and the error rate of the 20 %
  most uncertain answers against the rest;
- **claim level** (rows whose response is one claim, so the claim's label is the row's):
  the same for the claim's verdict (wrong: ``supported`` on a hallucinated row, anything
  else on a correct one) and its uncertainty;
- beside the served uncertainty (the default verifier's error ranker when it ships
  ``uncertainty.json``, else the entropy), the **entropy** of the claims' probabilities
  (the seed's uncertainty), a candidate ranker not shipped (``--ranker FILE``, e.g. one
  ``training/uncertainty.py --out`` wrote), and the **lexical** baseline (seed 001,
  threshold 0.5 on its score s): its decision's errors ranked by its own uncertainty
  ``1 − |2s − 1|``.

The cached signals record each claim's entropy and the ranker's features
(:func:`guards.verdict.uncertainty.features_from_claim_row`); a ranker's P(wrong) is computed from
them with the verifier's threshold — the numbers the served path computes.

The rows and their served signals are the ``bench.kshot`` pools (seeded rows of each eval
file, the row's context as request evidence, default policy), read from its cache: run
``python -m bench.kshot --extract-only`` first (the figures are those of the cached code
fingerprint, printed in the header).

    python -m bench.uncertainty [--pool 400] [--split eval] [--ranker FILE] [--verifier NAME]
        [--out bench/results/uncertainty.txt]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sklearn.metrics import roc_auc_score

from bench.accuracy import lexical_scores
from bench.kshot import CACHE, DATA, extract, fingerprint
from groundproxy.guards.adapter.signals import CLAIM_FIELDS
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.guards.verdict.uncertainty import (
    ErrorRanker,
    error_ranker,
    features_from_claim_row,
)

UNCERTAINTY = CLAIM_FIELDS.index("uncertainty")
SUPPORTED = CLAIM_FIELDS.index("supported")
GOAL = 0.70
TOP = 0.20  # share of the most uncertain answers whose error rate is reported


def auc(errors: list[int], scores: list[float]) -> float | None:
    """ROC-AUC of ``scores`` for ``errors`` (None with one class only)."""
    return float(roc_auc_score(errors, scores)) if len(set(errors)) == 2 else None


def top_error_rate(errors: list[int], scores: list[float], share: float = TOP) -> float:
    """Error rate among the ``share`` highest-scored rows (ties broken by order)."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])[
        : max(1, round(share * len(scores)))
    ]
    return sum(errors[i] for i in order) / len(order)


Ranker = tuple[ErrorRanker, float] | None  # (ranker, the threshold in force) or the entropy


def claim_uncertainty(rows: Sequence[Sequence[float]], ranker: Ranker) -> list[float]:
    """Each claim's uncertainty from its signals row: the ranker's P(wrong), or the entropy."""
    if ranker is None:
        return [r[UNCERTAINTY] for r in rows]
    model, tau = ranker
    return [
        model.p_wrong(features_from_claim_row(r, CLAIM_FIELDS, tau, len(rows)), r[SUPPORTED] == 1)
        for r in rows
    ]


def file_figures(
    rows: list[dict[str, Any]], scored: list[dict[str, Any]], rankers: dict[str, Ranker]
) -> dict[str, Any]:
    """The figures of one file (module docstring) from its cached pool; ``rankers``: name →
    ranker (None: the entropy), the first is the served one."""
    labels = [int(r["label_hallucinated"]) for r in rows]
    claims = [s["signals"]["claims"] for s in scored]
    errors = [int(int(s["zero"]) != y) for s, y in zip(scored, labels, strict=True)]
    one = [i for i, cs in enumerate(claims) if len(cs) == 1]
    claim_err = [int((claims[i][0][SUPPORTED] == 1.0) == bool(labels[i])) for i in one]
    lex, _ = lexical_scores(rows, LexicalVerifier())
    lex_err = [int((p < 0.5) != bool(y)) for p, y in zip(lex, labels, strict=True)]
    out: dict[str, Any] = {"n": len(rows), "errors": sum(errors)}
    for k, (name, ranker) in enumerate(rankers.items()):
        per_claim = [claim_uncertainty(cs, ranker) for cs in claims]
        unc = [max(u, default=0.0) for u in per_claim]
        out[f"auc:{name}"] = auc(errors, unc)
        if k == 0:
            out["top_error_rate"] = top_error_rate(errors, unc)
            out["claim_auc"] = auc(claim_err, [per_claim[i][0] for i in one])
    out.update(
        error_rate=sum(errors) / len(errors),
        one_claim=len(one),
        lexical_auc=auc(lex_err, [1.0 - abs(2.0 * p - 1.0) for p in lex]),
    )
    return out


def _fmt(v: float | None) -> str:
    return "    –" if v is None else f"{v:.3f}"


def table(results: dict[str, dict[str, Any]], names: list[str], header: str) -> str:
    lines = [header, "", "answer AUC: " + ", ".join(names) + " (the first is served)", ""]
    cols = "".join(f" {n[:12]:>12}" for n in names)
    lines.append(
        f"{'file':24} {'rows':>5} {'errors':>6} │{cols} │ {'err top20%':>10} "
        f"{'err all':>8} │ {'1-claim':>7} {'claim AUC':>9} │ {'lexical AUC':>11}"
    )
    for name, f in results.items():
        aucs = "".join(f" {_fmt(f[f'auc:{n}']):>12}" for n in names)
        lines.append(
            f"{name:24} {f['n']:>5} {f['errors']:>6} │{aucs} │ "
            f"{f['top_error_rate']:>10.3f} {f['error_rate']:>8.3f} │ {f['one_claim']:>7} "
            f"{_fmt(f['claim_auc']):>9} │ {_fmt(f['lexical_auc']):>11}"
        )
    means = []
    for n in names:
        aucs = [f[f"auc:{n}"] for f in results.values() if f[f"auc:{n}"] is not None]
        if aucs:
            passed = sum(a >= GOAL for a in aucs)
            means.append(f"{n}: mean {statistics.mean(aucs):.3f}, ≥ {GOAL} on {passed}/{len(aucs)}")
    lines.append("MEAN answer AUC — " + "; ".join(means))
    return "\n".join(lines) + "\n"


def rankers(verifier_name: str, candidate: Path | None) -> dict[str, Ranker]:
    """The served uncertainty (the verifier's ranker, else the entropy), the entropy, and the
    candidate ranker file if any (read with the verifier's threshold)."""
    from groundproxy.models.registry import VerifierRegistry

    verifier = VerifierRegistry().get(verifier_name)
    tau = float(getattr(verifier, "threshold", 0.6))
    served = error_ranker(verifier)
    out: dict[str, Ranker] = {"served": (served, tau) if served else None, "entropy": None}
    if candidate is not None:
        data = json.loads(candidate.read_text(encoding="utf-8"))
        out[candidate.stem] = (ErrorRanker.from_dict(data), tau)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--split", choices=("eval", "train"), default="eval")
    ap.add_argument("--pool", type=int, default=400)
    ap.add_argument("--ranker", type=Path, default=None, help="a candidate uncertainty.json")
    ap.add_argument(
        "--verifier",
        default="default",
        help="the verifier the cached signals are of (its ranker and threshold; the cache "
        "holds the default's unless the fingerprint is pinned to another run's)",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    named = rankers(args.verifier, args.ranker)
    cache = CACHE / ("kshot" if args.split == "eval" else "kshot-train")
    results: dict[str, dict[str, Any]] = {}
    for path in sorted((args.data / args.split).glob("*.jsonl")):
        rows, scored, _ = extract(path, args.pool, None, cache)  # the cache only
        if rows:
            results[path.stem] = file_figures(rows, scored, named)
    header = (
        f"uncertainty for the verifier's own errors (ROC-AUC; goal ≥ {GOAL} on every file); "
        f"bench.kshot pools of ≤ {args.pool} seeded rows of {args.split}, context mode, "
        f"default policy, verifier {args.verifier}, signals of code fingerprint {fingerprint()}"
    )
    text = table(results, list(named), header)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
