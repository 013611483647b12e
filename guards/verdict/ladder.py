"""The verifier ladder: a fast verifier on every claim, a strong one on the claims it is unsure of.

Stage 1 (:func:`guards.verdict.stages.verify`) scores every claim with the fast rung (the policy's
``verifier.model``). When ``verifier.ladder.strong`` names a verifier, the claims the fast
rung is unsure of climb one rung, inside the same stage (:func:`guards.verdict.stages.climb`):

1. the fast verdicts are decided (:func:`guards.verdict.stages.decide`); a claim is *unsure*
   when its decision margin (:mod:`guards.verdict.uncertainty`; a calibration of its errors
   aside) is at least ``ladder.min_uncertainty`` and the strong rung could change it (it has
   evidence and no value rule decided it) — :func:`select`;
2. at most ``ladder.max_share`` of the answer's claims (rounded up), most uncertain first,
   are scored again by the strong rung, every (claim, passage) pair and the rule's correction
   (:func:`rescore`), one claim after the other while the time allows: ``ladder.budget_ms``
   from the ladder's start and never past the guard's own deadline. A claim the strong rung
   would not finish in time (:class:`CostMeter`: its ms per pair so far) is not started;
3. the strong rung's probabilities replace the fast ones for the claims it scored, which are
   then decided with the strong verifier's own threshold, contradiction bar and error ranker
   (:class:`StrongRung`); their uncertainty is the strong rung's, so the judge
   (``judge.escalate: uncertain``) gets the claims still unsure after it.

Never silent: every claim says which rung decided it (``ClaimResult.rung``: ``fast``,
``strong`` or ``judge``) and an unsure claim the strong rung did not score says why
(``rung_skipped``: ``share``, ``budget``, or ``error`` when the strong verifier failed — its
fast verdict stands). The body and the ``x-groundproxy-ladder`` header count them
(:mod:`guards.answer.report`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from groundproxy.guards.types import ClaimResult, Pair, Probs, Verifier
from groundproxy.guards.verdict.decide import contradiction_bar, model_threshold
from groundproxy.guards.verdict.uncertainty import ErrorModel, error_ranker

LadderSkip = Literal["budget", "share", "error"]
RESERVE_S = 0.05  # of the guard's own deadline, left for the decision and the answer's text
NO_LADDER = "none"  # verifier.ladder.strong: the ladder is off


@dataclass(frozen=True)
class StrongRung:
    """What deciding a claim the strong rung scored needs: the strong verifier's name, its
    fitted P(supported) threshold (used under ``threshold: model``), contradiction bar and
    ranker or calibration of its own errors."""

    name: str
    threshold: float | None
    contradiction_min: float
    ranker: ErrorModel | None = None

    @classmethod
    def of(cls, verifier: Verifier) -> StrongRung:
        return cls(
            verifier.name,
            model_threshold(verifier),
            contradiction_bar(verifier),
            error_ranker(verifier),
        )


class CostMeter:
    """A strong verifier's ms per pair (a moving average over the claims it scored), so the
    ladder starts no claim it would not finish within the budget. Shared by the requests
    of one process (one meter per strong verifier)."""

    def __init__(self, ms_per_pair: float = 0.0, weight: float = 0.2) -> None:
        self.ms_per_pair = ms_per_pair
        self.weight = weight
        self.seen = ms_per_pair > 0.0
        self._lock = threading.Lock()

    def observe(self, ms: float, pairs: int) -> None:
        if pairs <= 0:
            return
        per = ms / pairs
        with self._lock:
            if not self.seen:
                self.ms_per_pair, self.seen = per, True
            else:
                self.ms_per_pair += self.weight * (per - self.ms_per_pair)

    def estimate_ms(self, pairs: int) -> float:
        return self.ms_per_pair * pairs


@dataclass(frozen=True)
class Rungs:
    """The verifiers of one guarded answer: ``fast`` scores every claim; ``strong`` (None:
    no ladder) the unsure ones. ``deadline``: ``clock()`` time of the guard's latency budget
    end (None: only ``ladder.budget_ms`` bounds the strong rung); ``meter``: the strong
    verifier's cost so far (None: a fresh one); ``halt``: checked before each claim the
    strong rung scores, as the guard's other slices are (true: the caller gave up, the rest
    is skipped ``budget``; the serving layer takes its turn at the cores there)."""

    fast: Verifier
    strong: Verifier | None = None
    deadline: float | None = None
    meter: CostMeter | None = field(default=None, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    halt: Callable[[], bool] | None = field(default=None, compare=False)


def as_rungs(verifier: Verifier | Rungs) -> Rungs:
    return verifier if isinstance(verifier, Rungs) else Rungs(verifier)


def share_cap(n_claims: int, max_share: float) -> int:
    """The most claims of an answer of ``n_claims`` the strong rung scores: the share,
    rounded up (0 when the share is 0)."""
    if max_share <= 0.0 or n_claims <= 0:
        return 0
    return min(n_claims, math.ceil(max_share * n_claims - 1e-9))


class Unsure(Protocol):
    """What :func:`select` reads of a claim's result (a :class:`ClaimResult`, or a bench's
    cached verdict)."""

    @property
    def uncertainty(self) -> float: ...


def select(
    results: Sequence[Unsure],
    eligible: Sequence[bool],
    min_uncertainty: float,
    max_share: float,
) -> tuple[list[int], list[int]]:
    """(claims the strong rung scores, unsure claims over the share): the eligible claims
    whose uncertainty is at least ``min_uncertainty``, most uncertain first (ties in answer
    order); the first :func:`share_cap` of them are picked, the rest are over the share."""
    unsure = [i for i, r in enumerate(results) if eligible[i] and r.uncertainty >= min_uncertainty]
    unsure.sort(key=lambda i: (-results[i].uncertainty, i))
    cap = share_cap(len(results), max_share)
    return unsure[:cap], unsure[cap:]


def budget_end(rungs: Rungs, budget_ms: int, started: float) -> float:
    """When the strong rung must be done: ``budget_ms`` after ``started``, and never later
    than :data:`RESERVE_S` before the guard's deadline."""
    end = started + budget_ms / 1000.0
    if rungs.deadline is not None:
        end = min(end, rungs.deadline - RESERVE_S)
    return end


def rescore(
    todo: Sequence[tuple[int, list[Pair]]],
    strong: Verifier,
    rungs: Rungs,
    end: float,
) -> tuple[dict[int, list[Probs]], dict[int, LadderSkip]]:
    """The strong rung's Probs for each (claim index, its pairs) of ``todo``, in order, one
    claim at a time while ``rungs.clock()`` plus the claim's estimated cost stays within
    ``end``: (scored claims, skipped claims with the reason). A failure of the strong
    verifier skips that claim and the rest (``error``): their fast verdicts stand."""
    meter = rungs.meter if rungs.meter is not None else CostMeter()
    scored: dict[int, list[Probs]] = {}
    skipped: dict[int, LadderSkip] = {}
    failed = False
    for i, pairs in todo:
        if failed:
            skipped[i] = "error"
            continue
        if rungs.halt is not None and rungs.halt():  # before the clock: a wait is not cost
            skipped[i] = "budget"
            continue
        now = rungs.clock()
        if now >= end or now + meter.estimate_ms(len(pairs)) / 1000.0 > end:
            skipped[i] = "budget"
            continue
        try:
            probs = strong.score(pairs)
        except Exception:  # the strong rung is a second opinion: its failure costs only it
            skipped[i], failed = "error", True
            continue
        if len(probs) != len(pairs):
            skipped[i], failed = "error", True
            continue
        meter.observe((rungs.clock() - now) * 1000.0, len(pairs))
        scored[i] = probs
    return scored, skipped


def ladder_counts(results: Sequence[ClaimResult]) -> dict[str, int] | None:
    """How many claims each rung decided and how many unsure claims the strong rung skipped
    (by reason); None when no claim was scored by a verifier (nothing to count)."""
    if not any(r.rung is not None for r in results):
        return None
    counts = {"fast": 0, "strong": 0, "judge": 0, "skipped": 0}
    for r in results:
        if r.rung is not None:
            counts[r.rung] += 1
        if r.rung_skipped is not None:
            counts["skipped"] += 1
            key = f"skipped_{r.rung_skipped}"
            counts[key] = counts.get(key, 0) + 1
    return counts
