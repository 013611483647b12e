"""The guard queue of one process: how many guards wait or run, how long one takes lately,
and the worker limit they queue for (the decisions are :mod:`guards.failures`'s).

Guards run in worker threads, at most ``workers`` at a time (an ``anyio.CapacityLimiter``,
first come first served): on 2 cores, 40 guards sharing the CPU would all miss their
budgets, while a queue lets the first ones finish in time. A guard whose caller gave up
(budget, disconnect) before its thread started is skipped; one already running is counted
until it ends (it still holds a core), and :class:`Ticket` tells it to stop at its next
check (``guards.stages.verify``'s deadline callable).

The wait estimate: ``max(0, in_flight + reserved - workers + 1) × recent guard time /
workers`` — the guards ahead of a new one, drained ``workers`` at a time.

Arrival hold (``on_overload: queue``, :meth:`GuardQueue.hold`): a request waits, before its
upstream call and in arrival order, until a guard starting now would end within
:data:`HOLD_SHARE` of its budget (at most ``max_queue_ms``). Passing reserves a place
(``reserved``) that its first guard takes over (:meth:`GuardQueue.enter`) or its caller
gives back (:meth:`Reservation.release`), so requests let through together do not all see
the same free room. Without the hold, past capacity every queued guard ran over its budget
and came back unverified.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio

T = TypeVar("T")

EWMA_ALPHA = 0.3  # weight of the newest guard time in the "recent" average


HOLD_POLL_S = 0.005  # how often a held request looks for room
# A held request goes on when its guard is predicted to end within this share of the budget:
# the prediction (recent guard time × guards ahead) misses the upstream call still to come
# and the event loop's own load, and filled to 100 % a burst overran (11 of 40 in the
# process test).
HOLD_SHARE = 0.5


class Reservation:
    """A request's place among the guards to come, from its arrival hold to its first guard
    — or until ``ttl_s`` has passed, so a place nobody gives back (a stream whose body was
    never read) cannot inflate the estimate for ever."""

    def __init__(self, queue: GuardQueue, ttl_s: float) -> None:
        self.queue = queue
        self.expires = time.monotonic() + ttl_s

    @property
    def active(self) -> bool:
        return self in self.queue._reservations and time.monotonic() < self.expires

    def release(self) -> None:
        """Give the place back (taken over by a guard, or the request needs none)."""
        with self.queue.lock:
            self.queue._reservations.discard(self)


# The current request's reservation (set by the hold; the guard's ``enter`` takes it over).
_RESERVATION: contextvars.ContextVar[Reservation | None] = contextvars.ContextVar(
    "groundproxy_reservation", default=None
)


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
        # held requests let through whose guard has not entered yet (see ``reserved``)
        self._reservations: set[Reservation] = set()
        self.recent_s = 0.0  # EWMA of guard thread time; 0 until the first guard ends
        self._limiter: anyio.CapacityLimiter | None = None
        self._gate: anyio.Lock | None = None  # arrival order for held requests

    @property
    def reserved(self) -> int:
        """Live reservations (expired ones are dropped here)."""
        with self.lock:
            return self._live_reservations()

    def _live_reservations(self) -> int:
        now = time.monotonic()
        self._reservations = {r for r in self._reservations if r.expires > now}
        return len(self._reservations)

    def limiter(self) -> anyio.CapacityLimiter:
        if self._limiter is None:  # made in the event loop that uses it
            self._limiter = anyio.CapacityLimiter(self.workers)
        return self._limiter

    def estimate(self) -> tuple[float, float]:
        """(estimated wait, recent guard time) in seconds for a guard that starts now."""
        with self.lock:
            ahead = max(0, self.in_flight + self._live_reservations() - self.workers + 1)
            return ahead * self.recent_s / self.workers, self.recent_s

    async def hold(
        self, budget_s: float, max_s: float, ttl_s: float = 120.0
    ) -> tuple[Reservation | None, float]:
        """Wait, in arrival order, until a guard starting now would end within ``budget_s``
        (or would wait for none), for at most ``max_s``; then reserve a place (module
        docstring), kept at most ``ttl_s``. Returns (the reservation — None when the wait ran
        out —, seconds held)."""
        if self._gate is None:  # made in the event loop that uses it
            self._gate = anyio.Lock()
        began = time.monotonic()
        async with self._gate:
            waited = time.monotonic() - began > HOLD_POLL_S / 5  # behind other held requests
            while True:
                wait_s, guard_s = self.estimate()
                held = time.monotonic() - began if waited else 0.0
                # room: within the budget, or nothing ahead (a guard slower than its budget
                # alone gains nothing from waiting)
                if wait_s + guard_s <= HOLD_SHARE * budget_s or wait_s == 0.0:
                    reservation = Reservation(self, ttl_s)
                    with self.lock:
                        self._reservations.add(reservation)
                    _RESERVATION.set(reservation)
                    return reservation, held
                if held >= max_s:
                    return None, held
                waited = True
                await anyio.sleep(min(HOLD_POLL_S, max_s - held))

    def enter(self, budget_s: float) -> Ticket:
        found = _RESERVATION.get()
        if found is not None and found.queue is self:
            found.release()  # this guard takes over the place its request reserved
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
