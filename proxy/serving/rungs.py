"""The verifier ladder's rungs for one guarded answer (:mod:`guards.verdict.ladder` holds the
logic).

:func:`rungs_for` gives stage 1 (:func:`guards.verify`) the fast verifier (the policy's
``verifier.model``) and, unless ``verifier.ladder.strong`` is ``none``, the strong one — both
micro-batched when batching is on and behind the tenant's verdict cache — with the guard's
deadline and the strong verifier's cost meter (one per verifier per process, so a claim the
strong rung would not finish in the budget is not started). The strong verifier is loaded when
a claim first climbs (:class:`LoadOnUse`), never while an answer's rungs are set up: a guard
that was not warmed (``serve`` warms the policies' ladders at start) would otherwise pay the
model's load before the request context is read, out of the same budget. A strong verifier
that cannot be loaded costs only the ladder: its claims keep the fast verdict, marked ``error``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import structlog

from groundproxy.errors import GroundproxyError, ModelLoadError
from groundproxy.guards import NO_LADDER, CachingVerifier, Rungs
from groundproxy.guards.types import Pair, Probs, Verifier
from groundproxy.policies.schema import Policy
from groundproxy.proxy.serving.cpu_share import take_turn
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


class LoadOnUse:
    """The strong verifier ``name``, loaded by ``load`` at its first use (a score, or its
    threshold, contradiction bar or error ranker read to decide a claim it scored): an
    answer whose claims all stay on the fast rung never loads it. One that cannot be loaded
    scores by raising (:class:`Unavailable`), logged once."""

    def __init__(self, name: str, load: Callable[[], Verifier]) -> None:
        self._name = name
        self._load = load
        self._verifier: Verifier | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def contradiction_min(self) -> float:
        return self.loaded().contradiction_min

    @property
    def threshold(self) -> object:
        return getattr(self.loaded(), "threshold", None)

    @property
    def error_ranker(self) -> object:
        return getattr(self.loaded(), "error_ranker", None)

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        return self.loaded().score(pairs)

    def loaded(self) -> Verifier:
        with self._lock:
            if self._verifier is None:
                try:
                    self._verifier = self._load()
                except GroundproxyError as exc:
                    log.warning("ladder_strong_unavailable", verifier=self._name, error=exc.message)
                    self._verifier = Unavailable(self._name, exc.message)
            return self._verifier


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
    strong: Verifier = LoadOnUse(name, lambda: parts.verifier(name))
    if cache:  # a verifier that cannot be loaded caches nothing: its score raises
        strong = CachingVerifier(strong, parts.verdict_cache, policy.tenant)
    meter = parts.meters.get(name)
    # the strong rung's claims are slices too: each waits for its turn at the cores
    # (proxy.serving.cpu_share), and none starts once the guard was given up
    return Rungs(fast, strong, deadline, meter, time.monotonic, halt=take_turn)


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
