"""Guard workers shared by tenants by work done (proxy.serving.fair, GuardQueue's estimate)."""

from __future__ import annotations

import anyio
import pytest

from groundproxy.proxy.serving.admission import GuardQueue
from groundproxy.proxy.serving.fair import FairSlots


def test_a_freed_worker_goes_to_the_tenant_served_least() -> None:
    slots = FairSlots(1)
    order: list[str] = []

    async def guard(tenant: str, cost: float) -> None:
        await slots.acquire(tenant, cost)
        order.append(tenant)

    async def go() -> None:
        await slots.acquire("heavy", 1.0)  # running
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(guard, "heavy", 1.0)
                await anyio.sleep(0)
            tg.start_soon(guard, "light", 0.1)  # arrives last
            await anyio.sleep(0.01)
            for tenant in ("heavy", "light", "heavy", "heavy"):
                slots.release(tenant)
                await anyio.sleep(0.01)

    anyio.run(go)
    assert order[0] == "light"  # not behind the heavy tenant's three waiting guards
    assert order.count("heavy") == 3


def test_a_cancelled_waiter_leaves_its_line_and_one_alone_takes_every_worker() -> None:
    slots = FairSlots(2)

    async def go() -> None:
        await slots.acquire("a", 0.1)
        await slots.acquire("a", 0.1)  # alone: both workers
        with anyio.move_on_after(0.02):
            await slots.acquire("a", 0.1)
        assert slots.waiting() == 0 and slots.busy == 2
        slots.release("a")
        assert slots.busy == 1

    anyio.run(go)


def test_a_tenant_running_none_gets_a_worker_beyond_those_others_hold() -> None:
    """Issue 40.17: a flood holding every worker (its tenant alone a second ago) no longer
    holds a newcomer's guard until one of its guards ends; at most ``slots`` extra."""
    slots = FairSlots(2)

    async def go() -> None:
        await slots.acquire("flood", 5.0)
        await slots.acquire("flood", 5.0)  # alone: both workers
        with anyio.fail_after(1.0):
            await slots.acquire("quiet", 0.1)  # at once, beside them
        assert slots.busy == 3
        with anyio.move_on_after(0.12):  # its second guard waits for a worker
            await slots.acquire("quiet", 0.1)
        with anyio.fail_after(1.0):
            await slots.acquire("third", 0.1)
        assert slots.busy == 4 and slots.waiting() == 0
        with anyio.move_on_after(0.12):  # twice the workers at most
            await slots.acquire("fourth", 0.1)
        assert slots.busy == 4

    anyio.run(go)


def test_another_tenants_backlog_counts_only_up_to_the_newcomers_own_work() -> None:
    queue = GuardQueue(workers=1)
    queue.finished(0.1, queue.enter(60.0, chars=100, tenant="a"))  # 1 ms per character
    for _ in range(20):
        queue.enter(60.0, chars=100, tenant="a")  # 2 s of the flooding tenant's work
    wait_a, _ = queue.estimate(100, tenant="a")
    wait_b, own_b = queue.estimate(100, tenant="b")
    assert wait_a == pytest.approx(2.0)
    assert wait_b == pytest.approx(own_b)  # one guard's worth of "a" runs before it


def test_while_another_tenant_is_present_one_worker_is_kept_for_it() -> None:
    present = {"on": True}
    slots = FairSlots(2, lambda tenant: present["on"])

    async def go() -> None:
        await slots.acquire("flood", 1.0)
        with anyio.move_on_after(0.12):  # the second worker stays free for "quiet"
            await slots.acquire("flood", 1.0)
        assert slots.busy == 1
        await slots.acquire("quiet", 0.1)  # at once
        assert slots.busy == 2
        slots.release("quiet")
        present["on"] = False  # the other tenant left: the flood may take both
        with anyio.fail_after(1.0):
            await slots.acquire("flood", 1.0)
        assert slots.busy == 2

    anyio.run(go)
