"""The request's own context as the guard reads it: the tenant's vector cache (and its index's
stored sentence vectors behind it), the caller's halt and the budget's reserve
(guards.evidence.request_evidence)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from groundproxy.guards import RequestContext, with_context
from groundproxy.guards.types import EvidenceSource
from groundproxy.policies.schema import Policy
from groundproxy.proxy.serving.guard_build import GuardParts

# The share of the budget kept for the verifier, rules and decision once request-context
# vectors are being made: past it, the rest of the context is left out (top-N verified).
CONTEXT_RESERVE = 0.3
__all__ = ["CONTEXT_RESERVE", "request_context", "with_context"]
Stops = tuple[Callable[[], bool] | None, float | None]  # (halt, deadline as time.monotonic())


def request_context(
    parts: GuardParts,
    context: Sequence[tuple[str, str]],
    policy: Policy,
    index: EvidenceSource | None,
    stops: Stops = (None, None),
) -> RequestContext:
    """``context`` with the tenant's vectors; ``stops``: the caller's halt and deadline."""
    halt, deadline = stops
    stored = getattr(index, "sentences", None)  # TenantIndex / PgIndex: stored at ingest
    vectors = parts.context_cache.request(policy.tenant, parts.embedder, stored)
    reserve = CONTEXT_RESERVE * policy.latency_budget_ms / 1000.0
    until = None if deadline is None else deadline - reserve
    return RequestContext(list(context), vectors, halt=halt, until=until)
