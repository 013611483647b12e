"""The guard queue of one process: how many guards wait or run, how long one takes lately,
and the worker limit they queue for (the decisions are :mod:`guards.failures`'s).

Guards run in worker threads, at most ``workers`` at a time (an ``anyio.CapacityLimiter``,
first come first served): on 2 cores, 40 guards sharing the CPU would all miss their
budgets, while a queue lets the first ones finish in time. A guard whose caller gave up
(budget, disconnect) before its thread started is skipped; one already running is counted
until it ends (it still holds a core), and :class:`Ticket` tells it to stop at its next
check (``guards.stages.verify``'s deadline callable).

The wait estimate: ``max(0, in_flight - workers + 1) × recent guard time / workers`` — the
guards ahead of a new one, drained ``workers`` at a time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio

T = TypeVar("T")

EWMA_ALPHA = 0.3  # weight of the newest guard time in the "recent" average


class Ticket:
    """One admitted guard: queued, then running in a thread, or given up by its caller."""

    def __init__(self, queue: GuardQueue, deadline: float) -> None:
        self.queue = queue
        self.deadline = deadline  # time.monotonic() past which the work is abandoned
        self.started = False
        self.released = False

    def expired(self) -> bool:
        """True once the caller gave up or the deadline passed (checked by the guard)."""
        return self.released or time.monotonic() >= self.deadline

    def run(self, fn: Callable[[], T]) -> T:
        """``fn`` in the worker thread; skipped if the caller already gave up."""
        with self.queue.lock:
            if self.released:
                raise TimeoutError("the caller gave up before the guard started")
            self.started = True
        began = time.perf_counter()
        try:
            return fn()
        finally:
            self.queue.finished(time.perf_counter() - began)

    def leave(self) -> None:
        """The caller is done (answer, budget, cancel): a guard not yet started never will."""
        with self.queue.lock:
            if self.released:
                return
            self.released = True
            if not self.started:
                self.queue.in_flight -= 1


class GuardQueue:
    """In-flight guards, the recent guard time and the worker limit (module docstring)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.lock = threading.Lock()
        self.in_flight = 0  # queued or running (abandoned-but-running included)
        self.recent_s = 0.0  # EWMA of guard thread time; 0 until the first guard ends
        self._limiter: anyio.CapacityLimiter | None = None

    def limiter(self) -> anyio.CapacityLimiter:
        if self._limiter is None:  # made in the event loop that uses it
            self._limiter = anyio.CapacityLimiter(self.workers)
        return self._limiter

    def estimate(self) -> tuple[float, float]:
        """(estimated wait, recent guard time) in seconds for a guard that starts now."""
        with self.lock:
            ahead = max(0, self.in_flight - self.workers + 1)
            return ahead * self.recent_s / self.workers, self.recent_s

    def enter(self, budget_s: float) -> Ticket:
        with self.lock:
            self.in_flight += 1
        return Ticket(self, time.monotonic() + budget_s)

    def finished(self, seconds: float) -> None:
        with self.lock:
            self.in_flight -= 1
            if self.recent_s == 0.0:
                self.recent_s = seconds
            else:
                self.recent_s += EWMA_ALPHA * (seconds - self.recent_s)

    async def run(self, fn: Callable[[], T], ticket: Ticket) -> T:
        """``fn`` in a worker thread once a worker is free; the caller may be cancelled
        (its budget) at any point: the ticket is left and the thread told to stop."""
        try:
            return await anyio.to_thread.run_sync(
                ticket.run, fn, abandon_on_cancel=True, limiter=self.limiter()
            )
        finally:
            ticket.leave()
