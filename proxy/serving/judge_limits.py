"""The judge's limits (:mod:`proxy.serving.judging` uses them).

- :class:`RateLimiter`: at most ``judge.max_calls_per_minute`` judge calls per tenant in any
  :data:`WINDOW_S` seconds; :class:`SharedRateLimiter` keeps the windows in files under the
  data folder (``<data>/_judge_rate/<tenant>``, each check under ``flock``), so the
  processes of ``serve --workers N`` on one machine share one limit (:func:`rate_limiter`).
- :class:`JudgeAllowance`: what one request may still spend on the judge — at most
  ``judge.max_calls_per_request`` calls and judge waits adding up to at most
  ``latency_budget_ms`` — and, once a call timed out, nothing more (the rest of a sentence
  stream goes out marked at once). The guarded call sets one per request
  (:func:`judge_allowance`); a sentence stream holds its own.
- :func:`scrubbed`: the judge's ``reason`` without secrets, at most
  :data:`MAX_STORED_REASON` characters, before the body, traces and the inspector see it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import fcntl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from groundproxy.policies.schema import Policy
from groundproxy.proxy.upstream.redact import redact
from groundproxy.retrieval.names import validate_tenant

WINDOW_S = 60.0
MAX_STORED_REASON = 300  # characters of the judge's (scrubbed) reason kept
RATE_DIR = "_judge_rate"  # under the data folder: the shared rate windows (--workers > 1)


@dataclasses.dataclass
class JudgeAllowance:
    """What one request may still spend on the judge: ``calls`` judge calls, ``seconds``
    of judge waits in all; ``timed_out`` once a call ran out of time (later calls skip at
    once). Shared by every piece of a sentence stream and every choice of a request."""

    calls: int
    seconds: float
    timed_out: bool = False

    @classmethod
    def of(cls, policy: Policy) -> JudgeAllowance:
        return cls(policy.judge.max_calls_per_request, policy.latency_budget_ms / 1000.0)

    def spent(self) -> bool:
        return self.timed_out or self.calls <= 0 or self.seconds <= 0.0


_ALLOWANCE: contextvars.ContextVar[JudgeAllowance | None] = contextvars.ContextVar(
    "judge_allowance", default=None
)


@contextlib.contextmanager
def judge_allowance(allowance: JudgeAllowance) -> Iterator[JudgeAllowance]:
    """Judge calls made inside draw on ``allowance`` (one request's)."""
    token = _ALLOWANCE.set(allowance)
    try:
        yield allowance
    finally:
        _ALLOWANCE.reset(token)


def current_allowance(policy: Policy) -> JudgeAllowance:
    """The request's allowance (:func:`judge_allowance`), else a fresh one (one answer)."""
    found = _ALLOWANCE.get()
    return found if found is not None else JudgeAllowance.of(policy)


def scrubbed(reason: str) -> str:
    """The judge's ``reason`` as it may be stored and shown: no secrets, bounded."""
    return redact(reason[: MAX_STORED_REASON * 4])[:MAX_STORED_REASON]


class RateLimiter:
    """At most ``limit`` calls per tenant in any :data:`WINDOW_S` seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._calls: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, tenant: str, limit: int) -> bool:
        now = self.clock()
        with self._lock:
            calls = self._calls.setdefault(tenant, deque())
            while calls and now - calls[0] >= WINDOW_S:
                calls.popleft()
            if len(calls) >= limit:
                return False
            calls.append(now)
            return True


class SharedRateLimiter(RateLimiter):
    """:class:`RateLimiter` whose windows live in files (``<directory>/<tenant>``: the
    times of the calls in the last :data:`WINDOW_S` seconds), each check under an exclusive
    ``flock``: the processes of ``serve --workers N`` on one machine share one limit."""

    def __init__(self, directory: Path, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self.directory = directory

    def allow(self, tenant: str, limit: int) -> bool:
        if limit <= 0:
            return False
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / validate_tenant(tenant)
        with self._lock, open(path, "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # released when the file closes
            f.seek(0)
            now = self.clock()
            # a time ahead of this clock (another process's, or rounding) still counts
            calls = [t for t in _times(f.read()) if now - t < WINDOW_S]
            if len(calls) >= limit:
                return False
            calls.append(now)
            f.seek(0)
            f.truncate()
            f.write("".join(f"{t:.6f}\n" for t in calls).encode("ascii"))
            f.flush()
            return True


def _times(raw: bytes) -> list[float]:
    out: list[float] = []
    for word in raw.split():
        with contextlib.suppress(ValueError):
            out.append(float(word))
    return out


def rate_limiter(data_dir: Path, workers: int) -> RateLimiter:
    """The judge's rate limiter for a server of ``workers`` processes over ``data_dir``."""
    return SharedRateLimiter(data_dir / RATE_DIR) if workers > 1 else RateLimiter()
