"""The verifier ladder's rungs for one guarded answer (:mod:`guards.ladder` holds the logic).

:func:`rungs_for` gives stage 1 (:func:`guards.verify`) the fast verifier (the policy's
``verifier.model``) and, unless ``verifier.ladder.strong`` is ``none``, the strong one — both
micro-batched when batching is on and behind the tenant's verdict cache — with the guard's
deadline and the strong verifier's cost meter (one per verifier per process, so a claim the
strong rung would not finish in the budget is not started). A strong verifier that cannot be
loaded costs only the ladder: its claims keep the fast verdict, marked ``error``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import structlog

from groundproxy.errors import GroundproxyError, ModelLoadError
from groundproxy.guards import NO_LADDER, CachingVerifier, Rungs
from groundproxy.guards.types import Pair, Probs, Verifier
from groundproxy.policies.schema import Policy
from groundproxy.proxy.serving.guard_build import GuardParts

log = structlog.get_logger(__name__)

WARM_PAIR = Pair("The warranty lasts 12 months.", "The warranty lasts 12 months from purchase.")


class Unavailable:
    """A strong verifier that could not be loaded: scoring fails (the ladder marks the
    claims it wanted ``error`` and keeps their fast verdicts)."""

    contradiction_min = 0.5

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        self.message = message

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        raise ModelLoadError(self.message)


def strong_name(policy: Policy) -> str | None:
    """The policy's strong rung, or None when its ladder is off."""
    name = policy.verifier.ladder.strong
    return None if name == NO_LADDER else name


def rungs_for(
    parts: GuardParts, policy: Policy, fast: Verifier, cache: bool, deadline: float | None
) -> Rungs:
    """Stage 1's verifiers for one answer under ``policy`` (module docstring); ``cache``:
    the strong verifier behind the tenant's verdict cache, as the fast one is."""
    name = strong_name(policy)
    if name is None or name == fast.name:  # the fast rung is the strong one: nothing to climb
        return Rungs(fast)
    try:
        strong = parts.verifier(name)
    except GroundproxyError as exc:
        log.warning("ladder_strong_unavailable", verifier=name, error=exc.message)
        strong = Unavailable(name, exc.message)
    if cache and not isinstance(strong, Unavailable):
        strong = CachingVerifier(strong, parts.verdict_cache, policy.tenant)
    meter = parts.meters.get(name)
    return Rungs(fast, strong, deadline, meter, time.monotonic)


def warm_strong(parts: GuardParts, names: Sequence[str]) -> list[str]:
    """Load the strong verifiers the policies name and time one pair each (their cost meter
    starts from it); a bad name is reported, not fatal (its ladders mark ``error``)."""
    errors: list[str] = []
    for name in names:
        try:
            verifier = parts.verifier(name)
            verifier.score([WARM_PAIR])  # the first run of a session is slower
            started = time.perf_counter()
            verifier.score([WARM_PAIR])
            ms = (time.perf_counter() - started) * 1000.0
        except GroundproxyError as exc:
            errors.append(exc.message)
            log.error("verifier_not_loaded", verifier=name, error=exc.message)
            continue
        parts.meters.get(name).observe(ms, 1)
    return errors
