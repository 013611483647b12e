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
- beside them, the same for the **lexical** baseline (seed 001, threshold 0.5 on its score
  s): its decision's errors ranked by its own uncertainty ``1 − |2s − 1|``.

The rows and their served signals are the ``bench.kshot`` pools (seeded rows of each eval
file, the row's context as request evidence, default policy), read from its cache: run
``python -m bench.kshot --extract-only`` first (the figures are those of the cached code
fingerprint, printed in the header).

    python -m bench.uncertainty [--pool 400] [--split eval] [--out bench/results/uncertainty.txt]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from sklearn.metrics import roc_auc_score

from bench.accuracy import lexical_scores
from bench.kshot import CACHE, DATA, extract, fingerprint
from groundproxy.guards.adapter_signals import CLAIM_FIELDS
from groundproxy.guards.lexical import LexicalVerifier

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


def file_figures(rows: list[dict[str, Any]], scored: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one file (module docstring) from its cached pool."""
    labels = [int(r["label_hallucinated"]) for r in rows]
    claims = [s["signals"]["claims"] for s in scored]
    errors = [int(int(s["zero"]) != y) for s, y in zip(scored, labels, strict=True)]
    unc = [max((c[UNCERTAINTY] for c in cs), default=0.0) for cs in claims]
    one = [i for i, cs in enumerate(claims) if len(cs) == 1]
    claim_err = [int((claims[i][0][SUPPORTED] == 1.0) == bool(labels[i])) for i in one]
    lex, _ = lexical_scores(rows, LexicalVerifier())
    lex_err = [int((p < 0.5) != bool(y)) for p, y in zip(lex, labels, strict=True)]
    return {
        "n": len(rows),
        "errors": sum(errors),
        "answer_auc": auc(errors, unc),
        "error_rate": sum(errors) / len(errors),
        "top_error_rate": top_error_rate(errors, unc),
        "one_claim": len(one),
        "claim_auc": auc(claim_err, [claims[i][0][UNCERTAINTY] for i in one]),
        "lexical_auc": auc(lex_err, [1.0 - abs(2.0 * p - 1.0) for p in lex]),
    }


def _fmt(v: float | None) -> str:
    return "    –" if v is None else f"{v:.3f}"


def table(results: dict[str, dict[str, Any]], header: str) -> str:
    lines = [header, ""]
    lines.append(
        f"{'file':24} {'rows':>5} {'errors':>6} │ {'answer AUC':>10} {'err top20%':>10} "
        f"{'err all':>8} │ {'1-claim':>7} {'claim AUC':>9} │ {'lexical AUC':>11}"
    )
    for name, f in results.items():
        lines.append(
            f"{name:24} {f['n']:>5} {f['errors']:>6} │ {_fmt(f['answer_auc']):>10} "
            f"{f['top_error_rate']:>10.3f} {f['error_rate']:>8.3f} │ {f['one_claim']:>7} "
            f"{_fmt(f['claim_auc']):>9} │ {_fmt(f['lexical_auc']):>11}"
        )
    aucs = [f["answer_auc"] for f in results.values() if f["answer_auc"] is not None]
    if aucs:
        passed = sum(a >= GOAL for a in aucs)
        lines.append(
            f"{'MEAN':24} {'':>5} {'':>6} │ {statistics.mean(aucs):>10.3f} "
            f"(answer AUC ≥ {GOAL} on {passed}/{len(aucs)} files)"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--split", choices=("eval", "train"), default="eval")
    ap.add_argument("--pool", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cache = CACHE / ("kshot" if args.split == "eval" else "kshot-train")
    results: dict[str, dict[str, Any]] = {}
    for path in sorted((args.data / args.split).glob("*.jsonl")):
        rows, scored, _ = extract(path, args.pool, None, cache)  # the cache only
        if rows:
            results[path.stem] = file_figures(rows, scored)
    header = (
        f"uncertainty for the verifier's own errors (ROC-AUC; goal ≥ {GOAL} on every file); "
        f"bench.kshot pools of ≤ {args.pool} seeded rows of {args.split}, context mode, "
        f"default policy, signals of code fingerprint {fingerprint()}"
    )
    text = table(results, header)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
