"""The guard workers shared fairly between tenants, weighed by work.

A first-come-first-served worker limit let one tenant's burst of heavy guards (long
request contexts, long answers) hold every other tenant's guards behind it. Here:

- each tenant waits in its own line, and a freed worker goes to the waiting tenant that has
  been served the least work — start-time fair queuing over guard seconds: a guard is
  charged its predicted seconds when it starts and corrected to what it took when it ends,
  and a tenant coming back after idling starts level with the least-served active tenant (no
  credit hoarded while away);
- while another tenant is present (``others_present``: it has a request in flight, or had
  one within the last second), no tenant holds every worker: one is kept for the others,
  so a light request never waits for a heavy guard of another tenant to finish (guards are
  not preempted). One tenant alone gets every worker, as before;
- a tenant with no guard running never waits for a worker held by other tenants' guards:
  when every worker is taken it gets one more (at most ``slots`` more in all, issue 40.17 —
  a tenant seen over a second ago found both workers held by a flood's 2-second guards
  and ran past its budget). The extra thread barely shares the cores with them: while its
  tenant is the less served, their guards wait at their next slice
  (:mod:`proxy.serving.cpu_share`).

Slots are taken in the event loop (:meth:`FairSlots.acquire`) and given back when the guard
thread really ends (:meth:`FairSlots.release_from_thread`): a guard abandoned by its caller
keeps its worker until it stops at its next check, so the count stays the count of threads
running.
"""

from __future__ import annotations

import contextlib
from collections import Counter, deque
from collections.abc import Callable

import anyio
import anyio.from_thread
import anyio.lowlevel

RECHECK_S = 0.05  # a waiter looks again this often (another tenant may have left)


class FairSlots:
    """``slots`` workers, handed out per tenant (see the module docstring)."""

    def __init__(
        self, slots: int, others_present: Callable[[str], bool] = lambda tenant: False
    ) -> None:
        self.slots = slots
        self.others_present = others_present
        self._busy: Counter[str] = Counter()
        self._lines: dict[str, deque[tuple[anyio.Event, float]]] = {}
        self._served: dict[str, float] = {}
        self._token: anyio.lowlevel.EventLoopToken | None = None

    @property
    def busy(self) -> int:
        return sum(self._busy.values())

    def _floor(self) -> float:
        active = [self._served.get(t, 0.0) for t, line in self._lines.items() if line]
        return min(active) if active else max(self._served.values(), default=0.0)

    def _charge(self, tenant: str, seconds: float) -> None:
        self._served[tenant] = max(self._served.get(tenant, 0.0), self._floor()) + seconds

    def _may_take(self, tenant: str) -> bool:
        if self.busy >= self.slots:  # all taken: one more for a tenant running none
            return self._busy[tenant] == 0 and self.busy < 2 * self.slots
        return self._busy[tenant] < max(1, self.slots - 1) or not self.others_present(tenant)

    def waiting(self, tenant: str | None = None) -> int:
        """Guards waiting for a worker (of ``tenant``, or all)."""
        if tenant is not None:
            return len(self._lines.get(tenant, ()))
        return sum(len(line) for line in self._lines.values())

    async def acquire(self, tenant: str, cost_s: float) -> None:
        """Wait for a worker (in the event loop); a cancelled waiter leaves its line."""
        if self._token is None:
            self._token = anyio.lowlevel.current_token()
        entry = (anyio.Event(), cost_s)
        self._lines.setdefault(tenant, deque()).append(entry)
        self._dispatch()
        try:
            while not entry[0].is_set():
                with anyio.move_on_after(RECHECK_S):
                    await entry[0].wait()
                if not entry[0].is_set():
                    self._dispatch()
        except BaseException:
            line = self._lines.get(tenant)
            if line is not None and entry in line:
                line.remove(entry)
            elif entry[0].is_set():  # granted as it was cancelled: hand the worker on
                self.release(tenant)
            raise

    def _dispatch(self) -> None:
        """Free workers to the least-served waiting tenants allowed to take one."""
        while True:
            waiting = [t for t, line in self._lines.items() if line and self._may_take(t)]
            if not waiting:
                return
            tenant = min(waiting, key=lambda t: self._served.get(t, 0.0))
            event, cost_s = self._lines[tenant].popleft()
            self._busy[tenant] += 1
            self._charge(tenant, cost_s)
            event.set()

    def release(self, tenant: str) -> None:
        """``tenant``'s worker is free (in the event loop): hand it on."""
        if self._busy[tenant] > 0:
            self._busy[tenant] -= 1
        self._dispatch()

    def settle(self, tenant: str, predicted_s: float, took_s: float) -> None:
        """Correct a started guard's charge to what it took."""
        self._served[tenant] = self._served.get(tenant, 0.0) + took_s - predicted_s

    def release_from_thread(self, tenant: str, predicted_s: float, took_s: float) -> None:
        """:meth:`settle` and :meth:`release`, called by the guard's worker thread."""

        def done() -> None:
            self.settle(tenant, predicted_s, took_s)
            self.release(tenant)

        if self._token is None:
            done()
            return
        # the event loop gone (shutdown, RuntimeError): nothing waits any more
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(done, token=self._token)
