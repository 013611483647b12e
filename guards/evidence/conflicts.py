"""Request context against the tenant's documents: who decides a claim's values.

With ``retrieval.use_request_context`` a claim's evidence mixes passages of the request's
own messages ("My friend says it's 48 months") and of the tenant's documents ("The
warranty lasts 12 months"). When the two disagree on the claim's values — the rules find
a value mismatch against the documents while the request states the claim's values — that
is a *conflict*: the loser's passages are dropped from the claim's evidence, so they can
neither support nor contradict it, and the claim reports the conflict. The winner is
``retrieval.conflict_winner``: ``documents`` (default; the tenant's sources are the truth,
a message cannot talk a wrong value into "supported") or ``request``.
"""

from __future__ import annotations

from collections.abc import Sequence

from groundproxy.guards.rules.check import RuleResult, check_claim
from groundproxy.guards.types import Evidence
from groundproxy.policies.schema import Policy


def resolve(
    claim: str, evidence: Sequence[Evidence], policy: Policy, pool: Sequence[str]
) -> tuple[list[Evidence], RuleResult, str | None]:
    """(the claim's evidence, its rule result, the conflict or None)."""
    texts = [e.text for e in evidence]
    docs = [e for e in evidence if e.source == "index"]
    request = [e for e in evidence if e.source == "request"]
    full = check_claim(claim, texts, policy.rules, pool)
    if not docs or not request:
        return list(evidence), full, None
    by_docs = check_claim(claim, [e.text for e in docs], policy.rules)
    by_request = check_claim(claim, [e.text for e in request], policy.rules)
    docs_against = bool(by_docs.mismatches) and by_request.ok  # the request states it
    request_against = bool(by_request.mismatches) and by_docs.ok
    if not (docs_against or request_against):
        return list(evidence), full, None
    winner = policy.retrieval.conflict_winner
    kept = docs if winner == "documents" else request
    values = ", ".join(f"{c} / {e}" for c, e in (by_docs.mismatches or by_request.mismatches))
    note = (
        f"the request and the tenant's documents disagree ({values}); "
        f"{winner} win (retrieval.conflict_winner)"
    )
    rule = check_claim(claim, [e.text for e in kept], policy.rules)
    return kept, rule, note
