"""Every rendering of a claim in one answer says the same thing.

An answer may state a value twice — in prose and again in a markdown table cell or a list
("lasts 24 months" … "| Robot | 24 months |"). When one claim's value is corrected by the
evidence (a rule mismatch), every other claim of the answer that is not supported (or is
supported only past a missing value, `rules.missing_support`) and
states the same value (same slot, :meth:`guards.rules.quantities.Quantity.same_value`) gets the
same correction and verdict, citing the same evidence: the prose is never corrected to 12
while the table keeps 24.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from groundproxy.guards.rules.check import RuleResult, same_correction
from groundproxy.guards.types import ClaimResult
from groundproxy.guards.verdict.decide import mismatch_probs


def harmonize(rules: Sequence[RuleResult], results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """``results`` (one per claim, in order, with its ``rules`` result) made consistent."""
    out = list(results)
    sources = [
        (i, r) for i, (rule, r) in enumerate(zip(rules, results, strict=True))
        if rule.swaps and r.verdict == "contradicted" and r.correction
    ]  # fmt: skip
    for j, r in enumerate(results):
        # a claim supported past a missing value (rules.missing_support) is not safe from a
        # value the answer's other claims were corrected on
        if (r.verdict == "supported" and rules[j].ok) or r.correction:
            continue
        for i, src in sources:
            fixed = same_correction(r.claim.text, rules[i].swaps)
            if i == j or fixed is None:
                continue
            probs = mismatch_probs(r.probs)
            out[j] = replace(
                r,
                verdict="contradicted",
                probs=probs,
                uncertainty=probs.uncertainty(),
                citations=list(src.citations),
                correction=fixed,
                explanation=f"{rules[i].explanation} (as corrected in: {src.claim.text!r})",
                correction_support=src.correction_support,
            )
            break
    return out
