"""The guard queue of one process: how many guards wait or run, how long one takes lately,
and the worker limit they queue for (the decisions are :mod:`guards.answer.failures`'s).

Guards run in worker threads, at most ``workers`` at a time (handed out fairly between
tenants, :mod:`proxy.serving.fair`): on 2 cores, 40 guards sharing the CPU would all miss their
budgets, while a queue lets the first ones finish in time. A guard whose caller gave up
(budget, disconnect) before its thread started is skipped; one already running is counted
until it ends (it still holds a core), and :class:`Ticket` tells it to stop at its next
check (``guards.verdict.stages.verify``'s deadline callable).

The wait estimate counts work, not guards: a guard's cost is predicted from its text length
(recent guard seconds per character, :data:`EWMA_ALPHA`), so a one-sentence segment of a
stream does not weigh as a whole answer. Ahead of a new guard are every queued or running
guard and every reservation — a request let through (any tenant) whose guards have not all
entered yet, at the recent characters per request less what it already guarded. The wait is
that work, less what the other workers finish while this guard runs, shared by ``workers``.

Tenants share fairly (issue 30): guards wait for a worker in per-tenant lines served by
least work done (:mod:`proxy.serving.fair`), each tenant's guard cost is predicted from its
own recent seconds per character (a tenant sending big contexts has its own, higher rate),
and a tenant's wait counts its own work ahead plus, of every other tenant's, at most as much
as its own (what fair sharing lets through before it) — so one tenant's flood of heavy
requests no longer holds another tenant's requests, in the arrival hold or for a worker.

Arrival hold (``on_overload: queue``, :meth:`GuardQueue.hold`): a request waits, before its
upstream call and in arrival order, until a guard starting now would end within
:data:`HOLD_SHARE` of its budget (at most ``max_queue_ms``). Passing reserves a place that
its guard takes over (:meth:`GuardQueue.enter`) or its caller gives back
(:meth:`Reservation.release`), so requests let through together do not all see the same free
room. Requests of the other tenants reserve a place too, without waiting
(:meth:`GuardQueue.reserve`): one gate sees every tenant's coming work. A stream keeps its
place until it ends, less each segment guarded. Without the hold, past capacity every queued
guard ran over its budget and came back unverified.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import structlog

from groundproxy.policies.schema import Policy
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.cpu_share import CpuShare, Run
from groundproxy.proxy.serving.fair import FairSlots

log = structlog.get_logger(__name__)
T = TypeVar("T")

EWMA_ALPHA = 0.3  # weight of the newest guard time in the "recent" average


HOLD_POLL_S = 0.005  # how often a held request looks for room
PRESENT_S = 1.0  # a tenant seen this recently keeps a worker from another's flood (fair)
# A held request goes on when its guard is predicted to end within this share of the budget:
# the prediction (recent guard time × guards ahead) misses the upstream call still to come
# and the event loop's own load, and filled to 100 % a burst overran (11 of 40 in the
# process test).
HOLD_SHARE = 0.5


class Rate:
    """Recent guard costs (EWMAs): seconds per guard, characters per guard and characters
    guarded per request — the process's, and each tenant's own."""

    def __init__(
        self, recent_s: float = 0.0, recent_chars: float = 0.0, request_chars: float = 0.0
    ) -> None:
        self.recent_s = recent_s
        self.recent_chars = recent_chars
        self.request_chars = request_chars


def _ewma(old: float, new: float) -> float:
    """The running average after ``new`` (``new`` itself for the first value)."""
    return new if old <= 0 else old + EWMA_ALPHA * (new - old)


class Reservation:
    """A request's place among the guards to come, from its arrival to its guard (a stream:
    to its end) — or until ``ttl_s`` has passed, so a place nobody gives back (a stream
    whose body was never read) cannot inflate the estimate for ever."""

    def __init__(self, queue: GuardQueue, ttl_s: float, tenant: str = "") -> None:
        self.queue = queue
        self.tenant = tenant
        self.expires = time.monotonic() + ttl_s
        self.stream = False  # kept while segments are guarded (Held.detach)
        self.guarded_chars = 0  # text its guards took so far

    @property
    def active(self) -> bool:
        return self in self.queue._reservations and time.monotonic() < self.expires

    def release(self) -> None:
        """Give the place back (taken over by a guard, or the request needs none)."""
        self.queue.released(self)


# The current request's reservation (set by the hold; the guard's ``enter`` takes it over).
_RESERVATION: contextvars.ContextVar[Reservation | None] = contextvars.ContextVar(
    "groundproxy_reservation", default=None
)


class Ticket:
    """One admitted guard: queued, then running in a thread, or given up by its caller."""

    def __init__(
        self, queue: GuardQueue, deadline: float, chars: int = 0, tenant: str = ""
    ) -> None:
        self.queue = queue
        self.deadline = deadline  # time.monotonic() past which the work is abandoned
        self.chars = chars  # the text's length (0: unknown, a typical guard)
        self.tenant = tenant
        self.started = False
        self.released = False
        self.slot = False  # holds one of the fair workers (released when its thread ends)
        self.share: Run | None = None  # its turn at the cores while running (cpu_share)

    def given_up(self) -> bool:
        """True once the caller gave up or the deadline passed."""
        return self.released or time.monotonic() >= self.deadline

    def expired(self) -> bool:
        """The guard's check between slices (its ``halt``): first its turn at the cores
        (:meth:`CpuShare.checkpoint`, in its own thread only), then :meth:`given_up`."""
        if self.share is not None:
            self.queue.share.checkpoint(self.share)
        return self.given_up()

    def run(self, fn: Callable[[], T]) -> T:
        """``fn`` in the worker thread; skipped if the caller already gave up."""
        with self.queue.lock:
            if self.released:
                raise TimeoutError("the caller gave up before the guard started")
            self.started = True
        began = time.perf_counter()
        share = self.share = self.queue.share.begin(self.tenant, self.given_up)
        try:
            return fn()
        finally:
            self.share = None
            self.queue.share.end(share)
            took = time.perf_counter() - began - share.waited_s
            predicted = self.queue.cost(self.chars, self.tenant)
            self.queue.finished(took, self)
            if self.slot:
                self.queue.slots.release_from_thread(self.tenant, predicted, took)

    def leave(self) -> None:
        """The caller is done (answer, budget, cancel): a guard not yet started never will."""
        with self.queue.lock:
            if self.released:
                return
            self.released = True
            if not self.started:
                self.queue._tickets.discard(self)


class GuardQueue:
    """Queued and running guards, the recent guard costs and the worker limit (module
    docstring)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.lock = threading.Lock()
        self._tickets: set[Ticket] = set()  # queued or running (abandoned-but-running too)
        # requests let through whose guards have not all entered (see ``reserved``)
        self._reservations: set[Reservation] = set()
        self.recent_s = 0.0  # EWMA of guard thread time; 0 until the first guard ends
        self.recent_chars = 0.0  # EWMA of the guarded text's length, same guards
        self.request_chars = 0.0  # EWMA of the text guarded per released reservation
        self._rates: dict[str, Rate] = {}  # the same, per tenant
        # workers shared by tenants (proxy.serving.fair); when each tenant was last seen
        self.slots = FairSlots(self.workers, self._others_present)
        self.share = CpuShare()  # running guards' turns at the cores, between slices
        self._seen: dict[str, float] = {}
        self._limiter: anyio.CapacityLimiter | None = None
        self._gates: dict[str, anyio.Lock] = {}  # arrival order of a tenant's held requests

    @property
    def in_flight(self) -> int:
        """Guards queued or running."""
        with self.lock:
            return len(self._tickets)

    @property
    def reserved(self) -> int:
        """Live reservations (expired ones are dropped here)."""
        with self.lock:
            return len(self._live_reservations())

    def _live_reservations(self) -> set[Reservation]:
        now = time.monotonic()
        self._reservations = {r for r in self._reservations if r.expires > now}
        return self._reservations

    def _others_present(self, tenant: str) -> bool:
        """Has a tenant other than ``tenant`` a request in flight, or had one lately?"""
        now = time.monotonic()
        with self.lock:
            return any(t != tenant and now - at < PRESENT_S for t, at in self._seen.items()) or any(
                r.tenant != tenant for r in self._live_reservations()
            )

    def _saw(self, tenant: str) -> None:  # lock held
        self._seen[tenant] = time.monotonic()

    def limiter(self) -> anyio.CapacityLimiter:
        """The threads guards run in: the fair slots bound how many run; this only keeps
        anyio's default thread limit out of the way."""
        if self._limiter is None:  # made in the event loop that uses it
            self._limiter = anyio.CapacityLimiter(self.workers * 4)
        return self._limiter

    def _rate(self, tenant: str) -> Rate:
        """The tenant's recent costs once it has some, else the process's."""
        own = self._rates.get(tenant)
        if own is not None and own.recent_s > 0:
            return own
        return Rate(self.recent_s, self.recent_chars, self.request_chars)

    def cost(self, chars: float, tenant: str = "") -> float:
        """Predicted seconds of ``tenant``'s guard over ``chars`` characters (<= 0: a
        typical one)."""
        rate = self._rate(tenant)
        if chars <= 0 or rate.recent_chars <= 0:
            return rate.recent_s
        return rate.recent_s * chars / rate.recent_chars

    def _request_cost(self, r: Reservation | None = None, tenant: str = "") -> float:
        """Predicted guard seconds still to come for a request (a new one when None)."""
        done = r.guarded_chars if r is not None else 0
        rate = self._rate(r.tenant if r is not None else tenant)
        if rate.request_chars <= 0:  # nothing measured per request yet: one typical guard
            return 0.0 if done else rate.recent_s
        left = rate.request_chars - done
        return self.cost(left, r.tenant if r is not None else tenant) if left > 0 else 0.0

    def estimate(self, chars: int | None = None, tenant: str = "") -> tuple[float, float]:
        """(estimated wait, predicted guard time) in seconds for ``tenant``'s guard over
        ``chars`` characters that enters now (None: a whole request's, not yet answered):
        its own work ahead, plus of each other tenant's at most as much as its own
        (module docstring)."""
        with self.lock:
            work: dict[str, float] = {}
            for ticket in self._tickets:
                work[ticket.tenant] = work.get(ticket.tenant, 0.0) + self.cost(
                    ticket.chars, ticket.tenant
                )
            for r in self._live_reservations():
                work[r.tenant] = work.get(r.tenant, 0.0) + self._request_cost(r)
            own = self._request_cost(tenant=tenant) if chars is None else self.cost(chars, tenant)
            mine = work.pop(tenant, 0.0)
            ahead = mine + sum(min(w, mine + own) for w in work.values())
            wait = max(0.0, ahead - (self.workers - 1) * own) / self.workers
            return (wait if wait > 1e-9 else 0.0), own

    def reserve(self, ttl_s: float = 120.0, tenant: str = "") -> Reservation:
        """A place for a request that does not wait (module docstring)."""
        reservation = Reservation(self, ttl_s, tenant)
        with self.lock:
            self._saw(tenant)
            self._reservations.add(reservation)
        _RESERVATION.set(reservation)
        return reservation

    async def hold(
        self, budget_s: float, max_s: float, ttl_s: float = 120.0, tenant: str = ""
    ) -> tuple[Reservation | None, float]:
        """Wait, in the arrival order of ``tenant``'s requests, until its guard starting now
        would end within ``budget_s`` (or would wait for none), for at most ``max_s``; then
        reserve a place (module docstring), kept at most ``ttl_s``. Returns (the reservation
        — None when the wait ran out —, seconds held)."""
        gate = self._gates.get(tenant)
        if gate is None:  # made in the event loop that uses it
            gate = self._gates[tenant] = anyio.Lock()
        began = time.monotonic()
        async with gate:
            waited = time.monotonic() - began > HOLD_POLL_S / 5  # behind other held requests
            while True:
                wait_s, guard_s = self.estimate(tenant=tenant)
                held = time.monotonic() - began if waited else 0.0
                # room: within the budget, or nothing ahead (a guard slower than its budget
                # alone gains nothing from waiting)
                if wait_s + guard_s <= HOLD_SHARE * budget_s or wait_s == 0.0:
                    return self.reserve(ttl_s, tenant), held
                if held >= max_s:
                    return None, held
                waited = True
                await anyio.sleep(min(HOLD_POLL_S, max_s - held))

    def enter(
        self,
        budget_s: float,
        chars: int = 0,
        reservation: Reservation | None = None,
        tenant: str = "",
    ) -> Ticket:
        """``tenant``'s guard over ``chars`` characters joins the queue; it takes over its
        request's reservation (``reservation``, else the one this context made), or, for a
        stream's, the part of it this segment stands for."""
        found = reservation or _RESERVATION.get()
        ticket = Ticket(self, time.monotonic() + budget_s, chars, tenant)
        with self.lock:
            self._saw(tenant)
            self._tickets.add(ticket)
            if found is not None and found.queue is self and found in self._reservations:
                found.guarded_chars += max(chars, 1)
                if not found.stream:
                    self._release(found)
        return ticket

    def released(self, reservation: Reservation) -> None:
        with self.lock:
            if reservation in self._reservations:
                self._release(reservation)

    def _release(self, r: Reservation) -> None:  # lock held
        self._reservations.discard(r)
        if r.guarded_chars > 0:  # what a request guarded in all, for the next estimates
            self.request_chars = _ewma(self.request_chars, float(r.guarded_chars))
            own = self._rates.setdefault(r.tenant, Rate())
            own.request_chars = _ewma(own.request_chars, float(r.guarded_chars))

    def finished(self, seconds: float, ticket: Ticket) -> None:
        with self.lock:
            self._tickets.discard(ticket)
            self._saw(ticket.tenant)
            self.recent_s = _ewma(self.recent_s, seconds)
            own = self._rates.setdefault(ticket.tenant, Rate())
            own.recent_s = _ewma(own.recent_s, seconds)
            if ticket.chars > 0:  # a guard of unknown length keeps the per-character scale
                self.recent_chars = _ewma(self.recent_chars, float(ticket.chars))
                own.recent_chars = _ewma(own.recent_chars, float(ticket.chars))

    async def run(self, fn: Callable[[], T], ticket: Ticket) -> T:
        """``fn`` in a worker thread once the fair slots give its tenant a worker; the caller
        may be cancelled (its budget, a hang-up) at any point: the ticket is left and the
        thread told to stop (it gives its worker back when it ends)."""
        try:
            await self.slots.acquire(ticket.tenant, self.cost(ticket.chars, ticket.tenant))
            ticket.slot = True
            try:
                return await anyio.to_thread.run_sync(
                    ticket.run, fn, abandon_on_cancel=True, limiter=self.limiter()
                )
            except BaseException:
                ticket.leave()  # a thread not started yet now never starts its work
                if not ticket.started:  # so it gives no worker back: do it here
                    ticket.slot = False
                    self.slots.release(ticket.tenant)
                raise
        finally:
            ticket.leave()


class Held:
    """A request's pass through the arrival hold (:meth:`GuardService.arrival`)."""

    def __init__(self, reservation: Reservation | None) -> None:
        self.reservation = reservation
        self.detached = False

    def release(self) -> None:
        if self.reservation is not None:
            self.reservation.release()

    def detach(self) -> Callable[[], None]:
        """Hand the place on to a stream: kept until it ends, less each segment its guards
        took; the caller calls what this returns when the stream ends."""
        self.detached = True
        if self.reservation is not None:
            self.reservation.stream = True
        return self.release


async def take_place(queue: GuardQueue, metrics: Metrics, policy: Policy) -> Reservation | None:
    """A guarded request's place before its upstream call (:meth:`GuardService.arrival`):
    ``on_overload: queue`` holds it (:meth:`GuardQueue.hold`, at most ``max_queue_ms``), the
    others reserve without waiting (:meth:`GuardQueue.reserve`). None: the hold expired."""
    ttl_s = policy.upstream.timeout_s + policy.latency_budget_ms / 1000.0
    if policy.on_overload == "queue" and policy.max_queue_ms > 0:
        reservation, held_s = await queue.hold(
            policy.latency_budget_ms / 1000.0, policy.max_queue_ms / 1000.0, ttl_s, policy.tenant
        )
    else:  # not held, but its coming guard counts for the others (fair per tenant)
        reservation, held_s = queue.reserve(ttl_s, policy.tenant), 0.0
    if reservation is None:  # waited max_queue_ms: go on; the guard will likely overrun
        metrics.observe_overload(policy.tenant, "hold_expired")
        log.warning("guard_hold_expired", held_ms=round(held_s * 1000.0))
    elif held_s > 0.0:
        metrics.observe_overload(policy.tenant, "held")
    return reservation
