"""Running guards of different tenants take turns at slice boundaries
(proxy.serving.cpu_share, through GuardQueue's tickets: the ``halt`` a guard checks)."""

from __future__ import annotations

import threading
import time

import pytest

from groundproxy.proxy.serving.admission import GuardQueue, Ticket
from groundproxy.proxy.serving.cpu_share import CpuShare


def _spin(seconds: float) -> None:
    """CPU work holding the GIL, as a guard's Python slices do."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_light_tenants_guard_runs_while_a_heavy_one_waits_at_its_slices() -> None:
    queue = GuardQueue(workers=2)
    heavy_slices: list[float] = []
    light_window: list[float] = []
    started = threading.Event()
    stop = threading.Event()

    def heavy(ticket: Ticket) -> None:
        while not stop.is_set():
            ticket.expired()  # the guard's halt check between slices
            _spin(0.005)
            heavy_slices.append(time.perf_counter())
            started.set()

    def light(ticket: Ticket) -> None:
        light_window.append(time.perf_counter())
        for _ in range(10):
            ticket.expired()
            _spin(0.005)
        light_window.append(time.perf_counter())

    h = queue.enter(60.0, 10_000, tenant="heavy")
    t = threading.Thread(target=h.run, args=(lambda: heavy(h),))
    t.start()
    try:
        assert started.wait(10.0)
        time.sleep(0.2)  # the heavy tenant has been served a while
        lt = queue.enter(60.0, 100, tenant="light")
        lt.run(lambda: light(lt))
    finally:
        stop.set()
        t.join(10.0)
    begin, end = light_window
    during = [s for s in heavy_slices if begin < s < end]
    # before: the two threads shared the GIL and cores slice for slice (~10 heavy slices
    # inside the light guard's); now the heavy guard finishes the slice it was in, then waits
    assert len(during) <= 1, (len(during), end - begin)
    assert len([s for s in heavy_slices if s > end]) > 0  # and goes on after it


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _checkpoint_in_thread(
    share: CpuShare, tenant: str, clock: Clock, at: float, deadline: threading.Event | None = None
) -> threading.Event:
    """A guard of ``tenant`` begun now that reaches a checkpoint once the clock reads ``at``
    (in a thread of its own; ``deadline`` set: past its deadline); the event returned is set
    once the checkpoint let it go on."""
    went_on = threading.Event()
    ready = threading.Event()
    hold = deadline or threading.Event()

    def run() -> None:
        r = share.begin(tenant, lambda: hold.is_set())
        ready.set()
        while clock.now < at:
            time.sleep(0.001)
        share.checkpoint(r)
        went_on.set()
        share.end(r)

    threading.Thread(target=run, daemon=True).start()
    assert ready.wait(5.0)
    return went_on


def test_a_returning_tenant_gets_a_bounded_credit_then_its_share_only() -> None:
    clock = Clock()
    share = CpuShare(credit_s=0.3, clock=clock)
    first = _checkpoint_in_thread(share, "heavy", clock, at=105.0)
    clock.now = 105.0  # the heavy tenant's guard ran 5 s
    assert first.wait(5.0)  # nobody else: it goes on at once
    time.sleep(0.05)  # and ends
    waiting = _checkpoint_in_thread(share, "heavy", clock, at=105.1)  # its next guard
    light = share.begin("light")  # placed 0.3 s behind the heavy tenant, not 5 s
    assert share.served("light") == pytest.approx(share.served("heavy") - 0.3)
    clock.now = 105.1  # heavy 5.1 s served, light 4.8 s: the heavy guard waits
    time.sleep(0.05)
    assert not waiting.is_set()
    clock.now = 105.3  # light 5.0 s, still behind (heavy is not charged while it waits)
    time.sleep(0.05)
    assert not waiting.is_set()
    clock.now = 105.5  # light 5.2 s: caught up, its fair share used — the heavy goes on
    assert waiting.wait(5.0)
    share.end(light)


def test_a_waiting_guard_goes_on_at_its_deadline() -> None:
    clock = Clock()
    share = CpuShare(credit_s=0.3, clock=clock)
    light = share.begin("light")
    clock.now = 100.5
    heavy = share.begin("heavy")  # placed 0.3 s behind light: light now waits for it
    deadline = threading.Event()
    waiting = _checkpoint_in_thread(share, "light", clock, at=100.5, deadline=deadline)
    time.sleep(0.05)
    assert not waiting.is_set()
    deadline.set()  # its deadline passed: it stops waiting (and stops at that check)
    assert waiting.wait(5.0)
    share.end(heavy)
    share.end(light)


def test_time_a_tenant_ran_alone_is_no_debt_when_another_runs_later() -> None:
    """Before: a tenant that ran alone for long kept its served time and, back beside a
    newcomer, waited at every slice until the newcomer had run as long (past its budget)."""
    clock = Clock()
    share = CpuShare(credit_s=0.3, clock=clock)
    alone = share.begin("a")
    clock.now += 100.0  # "a" alone for 100 s
    share.end(alone)
    other = share.begin("b")  # nothing else runs: placed nowhere
    clock.now += 1.0
    back = share.begin("a")  # beside "b": within the credit of it, not 100 s ahead
    assert share.served("a") == pytest.approx(share.served("b") - 0.3)
    share.end(back)
    share.end(other)
