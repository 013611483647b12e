"""The cores shared between tenants' running guards, slice by slice (issue 40 item 17).

:mod:`proxy.serving.fair` decides which guard gets a worker thread; once two tenants' guards
run side by side, they still split the two cores — a small tenant's 70 ms guard beside
another tenant's 8,000-word context ran ~2x slower (its ONNX calls, Python and the GIL all
shared). Here a guard's work yields to another tenant's at every slice boundary: the guard's
``halt`` check (embedder slices of ``SLICE_CHARS``, BM25 rows, verifier batches, claims; the
ladder's strong claims through :func:`take_turn`) is a :meth:`CpuShare.checkpoint`, where a
guard waits while a guard of a tenant that has been served less guard time is running.
:class:`proxy.serving.admission.Ticket` begins and ends each guard's :class:`Run`.

- **Served time** is the wall time a tenant's guards ran (not paused), counted per guard:
  start-time fair queuing again, now at slice granularity — a tenant's running work is
  charged as it goes, so a waiting guard sees it catch up and goes on when it has.
- **A tenant coming back** after its guards all ended is placed at most :data:`CREDIT_S` behind
  the least-served tenant running now (CFS's placement of a waking task, min_vruntime less a
  bounded credit), and at most as far ahead: a tenant whose guards are short and spaced runs
  ahead of a flood, while one that keeps its guards running gets its share, no more — no
  credit is hoarded, and no debt is kept either (once no guard runs at all, the served times
  start again from zero: time a tenant ran alone is nobody's loss).
- A guard never waits for its own tenant, nor past its own deadline (it then stops at that
  very check, as before: marked over budget, never unverified silently); it waits only in
  its own worker thread (a check from another thread only reads the deadline).

Nothing here turns verification off: a paused guard resumes where it stopped. What it cannot
share: a slice already running (one embedder call, ~15 ms on 2 quiet cores) and the event
loop's own work for the other tenant's requests (bodies, the upstream call).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# How far behind the least-served running tenant a returning tenant is placed (seconds of
# guard time): more than one ordinary guard (70-150 ms on 2 busy cores), so a light tenant's
# whole guard runs ahead of a flood's slices; small enough that a flood waits for a few light
# guards at most.
CREDIT_S = 0.3
POLL_S = 0.005  # a waiting guard looks again this often (others' served time grows)


_CURRENT = threading.local()  # the Run of the guard this worker thread runs, if any


def take_turn() -> bool:
    """A slice boundary the guard's ``halt`` does not reach (the ladder's strong rung, one
    claim at a time): wait for the turn of the guard this thread runs, if it runs one; then
    true when that guard should stop (its deadline)."""
    run: Run | None = getattr(_CURRENT, "run", None)
    if run is None or run.share is None:
        return False
    run.share.checkpoint(run)
    return run.give_up()


@dataclass(eq=False)
class Run:
    """One guard running in its worker thread."""

    tenant: str
    since: float  # time.monotonic() its current uncharged stretch began
    give_up: Callable[[], bool] = lambda: False  # true once the guard should stop (deadline)
    thread: int = field(default_factory=threading.get_ident)
    paused: bool = False
    share: CpuShare | None = None
    waited_s: float = 0.0  # time spent waiting for other tenants


class CpuShare:
    """Running guards' turns at slice boundaries (see the module docstring)."""

    def __init__(
        self, credit_s: float = CREDIT_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.credit_s = credit_s
        self.clock = clock
        self._cond = threading.Condition()
        self._served: dict[str, float] = {}
        self._runs: dict[str, list[Run]] = {}

    def _live(self, tenant: str, now: float) -> float:  # lock held
        """``tenant``'s served time, its running guards' stretches so far included."""
        runs = self._runs.get(tenant, ())
        return self._served.get(tenant, 0.0) + sum(now - r.since for r in runs if not r.paused)

    def _others(self, tenant: str, now: float) -> list[float]:  # lock held
        return [self._live(t, now) for t, runs in self._runs.items() if t != tenant and runs]

    def begin(self, tenant: str, give_up: Callable[[], bool] = lambda: False) -> Run:
        """A guard of ``tenant`` starts, in its worker thread (``give_up``: true once it
        should stop; a wait ends then)."""
        with self._cond:
            now = self.clock()
            others = self._others(tenant, now)
            if others and not self._runs.get(tenant):  # coming back: within the credit
                floor = min(others)
                own = self._served.get(tenant, floor - self.credit_s)
                own = max(own, floor - self.credit_s)  # no credit hoarded while away,
                self._served[tenant] = min(own, floor + self.credit_s)  # no debt kept
            run = Run(tenant, now, give_up, share=self)
            self._runs.setdefault(tenant, []).append(run)
        _CURRENT.run = run
        return run

    def checkpoint(self, run: Run) -> None:
        """Between two slices of ``run``'s work: wait while a less-served tenant's guard runs
        (``run.give_up`` true — the guard's deadline — ends the wait)."""
        if threading.get_ident() != run.thread:
            return
        with self._cond:
            began = self.clock()
            self._charge(run, began)
            run.paused = True
            try:
                while not run.give_up():
                    now = self.clock()
                    mine = self._live(run.tenant, now)
                    if not any(other < mine for other in self._others(run.tenant, now)):
                        break
                    self._cond.wait(POLL_S)
            finally:
                run.paused = False
                run.since = self.clock()
                run.waited_s += run.since - began

    def end(self, run: Run) -> None:
        """``run``'s guard ended (its thread is done with the cores)."""
        if getattr(_CURRENT, "run", None) is run:
            _CURRENT.run = None
        with self._cond:
            if not run.paused:
                self._charge(run, self.clock())
            runs = self._runs.get(run.tenant, [])
            if run in runs:
                runs.remove(run)
            if not runs:
                self._runs.pop(run.tenant, None)
            if not self._runs:  # nothing runs: time served alone is nobody's debt
                self._served.clear()
            self._cond.notify_all()

    def _charge(self, run: Run, now: float) -> None:  # lock held
        self._served[run.tenant] = self._served.get(run.tenant, 0.0) + now - run.since
        run.since = now

    def served(self, tenant: str) -> float:
        """``tenant``'s guard seconds so far (for tests and metrics)."""
        with self._cond:
            return self._live(tenant, self.clock())
