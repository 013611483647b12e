"""A fake :class:`~groundproxy.guards.types.Verifier`: probabilities you choose, no model.

    verifier = ScriptedVerifier(lambda pair: SUPPORTED if "12 months" in pair.evidence else UNSURE)
    report = run_guard(answer, ..., verifier=verifier, ...)
    assert verifier.batches == [3]          # one batch of three pairs

``probs`` is one :class:`Probs` for every pair, or a function of the :class:`Pair`. Every
call is recorded (``batches``: the size of each). ``error`` makes every call raise it (a
backend that crashed); ``delay_s`` sleeps first (a slow one). Hand it to the guard's
stages (``guards.verify``) directly, or — for a policy's ``verifier.model`` — put a factory
under its name in ``groundproxy.models.registry._FACTORIES`` for the test (monkeypatch).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from groundproxy.guards.types import CONTRADICTION_MIN, Pair, Probs

SUPPORTED = Probs(0.9, 0.05, 0.05)
CONTRADICTED = Probs(0.05, 0.9, 0.05)
UNSURE = Probs(0.1, 0.1, 0.8)


class ScriptedVerifier:
    """Scores every pair with ``probs`` (module docstring)."""

    def __init__(
        self,
        probs: Probs | Callable[[Pair], Probs] = UNSURE,
        *,
        name: str = "scripted",
        contradiction_min: float = CONTRADICTION_MIN,
        error: Exception | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.name = name
        self.contradiction_min = contradiction_min
        self._probs = probs
        self._error = error
        self._delay_s = delay_s
        self.batches: list[int] = []

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        self.batches.append(len(pairs))
        if self._delay_s:
            time.sleep(self._delay_s)
        if self._error is not None:
            raise self._error
        probs = self._probs
        return [probs(p) if callable(probs) else probs for p in pairs]
