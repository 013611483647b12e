"""The verifier ladder's rungs for one guarded answer (:mod:`guards.ladder` holds the logic).

:func:`rungs_for` gives stage 1 (:func:`guards.verify`) the fast verifier (the policy's
``verifier.model``) and, unless ``verifier.ladder.strong`` is ``none``, the strong one — both
micro-batched when batching is on and behind the tenant's verdict cache — with the guard's
deadline and the strong verifier's cost meter (one per verifier per process, so a claim the
strong rung would not finish in the budget is not started). A strong verifier that cannot be
loaded costs only the ladder: its claims keep the fast verdict, marked ``error``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Protocol

import structlog

from groundproxy.errors import GroundproxyError, ModelLoadError
from groundproxy.guards import NO_LADDER, CachingVerifier, CostMeter, Rungs
from groundproxy.guards.types import Pair, Probs, Verifier
from groundproxy.policies.schema import Policy
from groundproxy.proxy.serving.cpu_share import take_turn
from groundproxy.proxy.serving.guard_build import GuardParts

log = structlog.get_logger(__name__)

WARM_PAIR = Pair("The warranty lasts 12 months.", "The warranty lasts 12 months from purchase.")


class Guard(Protocol):
    """What the ladder needs of :class:`proxy.serving.guarding.GuardService`."""

    parts: GuardParts
    meters: Meters

    def verifier(self, name: str) -> Verifier: ...


class Unavailable:
    """A strong verifier that could not be loaded: scoring fails (the ladder marks the
    claims it wanted ``error`` and keeps their fast verdicts)."""

    contradiction_min = 0.5

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        self.message = message

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        raise ModelLoadError(self.message)


class Meters:
    """One :class:`CostMeter` per strong verifier name, for the life of a guard."""

    def __init__(self) -> None:
        self._meters: dict[str, CostMeter] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> CostMeter:
        with self._lock:
            return self._meters.setdefault(name, CostMeter())


def strong_name(policy: Policy) -> str | None:
    """The policy's strong rung, or None when its ladder is off."""
    name = policy.verifier.ladder.strong
    return None if name == NO_LADDER else name


def rungs_for(
    guard: Guard, policy: Policy, fast: Verifier, cache: bool, deadline: float | None
) -> Rungs:
    """Stage 1's verifiers for one answer under ``policy`` (module docstring); ``cache``:
    the strong verifier behind the tenant's verdict cache, as the fast one is."""
    name = strong_name(policy)
    if name is None or name == fast.name:  # the fast rung is the strong one: nothing to climb
        return Rungs(fast)
    try:
        strong = guard.verifier(name)
    except GroundproxyError as exc:
        log.warning("ladder_strong_unavailable", verifier=name, error=exc.message)
        strong = Unavailable(name, exc.message)
    if cache and not isinstance(strong, Unavailable):
        strong = CachingVerifier(strong, guard.parts.verdict_cache, policy.tenant)
    meter = guard.meters.get(name)
    # the strong rung's claims are slices too: each waits for its turn at the cores
    # (proxy.serving.cpu_share), and none starts once the guard was given up
    return Rungs(fast, strong, deadline, meter, time.monotonic, halt=take_turn)


def warm_strong(guard: Guard, names: Sequence[str]) -> list[str]:
    """Load the strong verifiers the policies name and time one pair each (their cost meter
    starts from it); a bad name is reported, not fatal (its ladders mark ``error``)."""
    errors: list[str] = []
    for name in names:
        try:
            verifier = guard.verifier(name)
            verifier.score([WARM_PAIR])  # the first run of a session is slower
            started = time.perf_counter()
            verifier.score([WARM_PAIR])
            ms = (time.perf_counter() - started) * 1000.0
        except GroundproxyError as exc:
            errors.append(exc.message)
            log.error("verifier_not_loaded", verifier=name, error=exc.message)
            continue
        guard.meters.get(name).observe(ms, 1)
    return errors
