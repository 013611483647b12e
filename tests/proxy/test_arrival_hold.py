"""``on_overload: queue`` holds a request before its upstream call until the guard queue has
room within the budget (proxy.serving.admission.GuardQueue.hold, GuardService.arrival)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from groundproxy.policies.schema import local_policy
from groundproxy.proxy.serving.admission import GuardQueue
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.testing.embedders import HashingEmbedder


def busy_queue(workers: int = 1, running: int = 3, recent_s: float = 0.1) -> GuardQueue:
    queue = GuardQueue(workers=workers)
    queue.recent_s = recent_s
    for _ in range(running):
        queue.enter(60.0)
    return queue


def test_room_at_once_reserves_a_place_that_counts_until_released() -> None:
    queue = GuardQueue(workers=2)
    queue.recent_s = 0.1

    async def go() -> None:
        reservation, held = await queue.hold(budget_s=1.0, max_s=5.0)
        assert reservation is not None and held < 0.5
        assert queue.reserved == 1
        assert queue.estimate()[0] == 0.0  # 1 reserved < 2 workers: nothing ahead yet
        ticket = queue.enter(1.0)  # its guard takes the place over
        assert queue.reserved == 0 and queue.in_flight == 1 and not reservation.active
        reservation.release()  # idempotent
        assert queue.reserved == 0
        ticket.leave()

    anyio.run(go)


def test_hold_waits_for_room_in_arrival_order() -> None:
    # 3 guards of 0.1 s on 1 worker: a new one would end in 0.4 s > half its 0.5 s budget
    queue = busy_queue()
    order: list[str] = []

    async def arrive(name: str) -> None:
        reservation, held = await queue.hold(budget_s=0.5, max_s=5.0)
        assert reservation is not None and held > 0.0
        order.append(name)

    running = list(queue._tickets)

    async def drain() -> None:
        for ticket in running:
            await anyio.sleep(0.05)
            queue.finished(0.1, ticket)  # one guard ends

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(arrive, "first")
            await anyio.sleep(0.01)
            tg.start_soon(arrive, "second")
            tg.start_soon(drain)

    anyio.run(go)
    assert order == ["first", "second"]
    # each let-through request reserved a place the estimate counts
    assert queue.reserved == 2 and queue.in_flight == 0


def test_hold_gives_up_after_max_and_reserves_nothing() -> None:
    queue = busy_queue(running=10)

    async def go() -> tuple[object, float]:
        return await queue.hold(budget_s=0.2, max_s=0.05)

    began = time.monotonic()
    reservation, held = anyio.run(go)
    assert reservation is None and 0.05 <= held < 1.0 and time.monotonic() - began < 1.0
    assert queue.reserved == 0


def test_a_guard_slower_than_its_budget_is_not_held_when_nothing_is_ahead() -> None:
    queue = busy_queue(running=0, recent_s=2.0)  # every guard overruns a 0.1 s budget

    async def go() -> tuple[object, float]:
        return await queue.hold(budget_s=0.1, max_s=5.0)

    reservation, held = anyio.run(go)
    assert reservation is not None and held < 0.5


@pytest.fixture
def service(tmp_path: Path) -> GuardService:
    return build_guard(Settings(data=tmp_path, batch_window_ms=0), embedder=HashingEmbedder())


def _overloads(service: GuardService, tenant: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for metric in service.parts.metrics.registry.collect():
        for s in metric.samples:
            if s.name == "groundproxy_guard_overload_total" and s.labels.get("tenant") == tenant:
                out[s.labels["outcome"]] = s.value
    return out


def test_arrival_holds_queue_tenants_only_and_releases_on_exit(service: GuardService) -> None:
    queue = service.parts.queue
    queue.recent_s = 0.1
    for _ in range(queue.workers + 5):
        queue.enter(60.0)
    queued = local_policy("q", latency_budget_ms=200, max_queue_ms=50)
    unheld = local_policy("u", on_overload="unverified")
    off = local_policy("z", max_queue_ms=0)

    async def go() -> list[float]:
        took: list[float] = []
        for policy in (queued, unheld, off):
            began = time.monotonic()
            async with service.arrival(policy):
                pass
            took.append(time.monotonic() - began)
        return took

    took = anyio.run(go)
    assert took[0] >= 0.05  # held until max_queue_ms, then let go
    assert took[1] < 0.05 and took[2] < 0.05
    assert _overloads(service, "q").get("hold_expired") == 1.0
    assert queue.reserved == 0


def test_a_place_nobody_gives_back_expires() -> None:
    queue = GuardQueue(workers=1)
    queue.recent_s = 0.1

    async def go() -> None:
        reservation, _ = await queue.hold(budget_s=1.0, max_s=1.0, ttl_s=0.05)
        assert reservation is not None and reservation.active and queue.reserved == 1
        await anyio.sleep(0.1)
        assert not reservation.active and queue.reserved == 0

    anyio.run(go)


def test_a_detached_place_outlives_the_handler_until_the_stream_ends(
    service: GuardService,
) -> None:
    policy = local_policy("s")

    async def go() -> None:
        async with service.arrival(policy) as held:
            release = held.detach()
        assert service.parts.queue.reserved == 1  # the stream still holds it
        release()
        assert service.parts.queue.reserved == 0

    anyio.run(go)


def test_the_estimate_weighs_guards_by_their_length() -> None:
    queue = GuardQueue(workers=1)
    first = queue.enter(60.0, chars=100)
    queue.finished(0.1, first)  # 0.1 s per 100 characters
    short = queue.enter(60.0, chars=100)
    assert queue.estimate(100) == pytest.approx((0.1, 0.1))
    short.leave()
    queue.enter(60.0, chars=1000)  # a whole long answer ahead: ten times the work
    wait, own = queue.estimate(100)
    assert wait == pytest.approx(1.0) and own == pytest.approx(0.1)


def test_a_stream_keeps_its_place_less_each_segment_until_it_ends() -> None:
    queue = GuardQueue(workers=1)
    queue.finished(0.3, queue.enter(60.0, chars=300))  # 1 ms per character
    whole = queue.reserve()
    queue.finished(0.3, queue.enter(60.0, chars=300, reservation=whole))
    assert queue.request_chars == 300.0 and queue.reserved == 0  # taken over at once
    stream = queue.reserve()
    stream.stream = True
    assert queue.estimate(0)[0] == pytest.approx(0.3)  # a whole request still to come
    segment = queue.enter(60.0, chars=100, reservation=stream)
    queue.finished(0.1, segment)
    assert queue.reserved == 1  # kept for the segments to come
    assert queue.estimate(100)[0] == pytest.approx(0.2)  # 200 of its 300 characters left
    queue.finished(0.2, queue.enter(60.0, chars=200, reservation=stream))
    assert queue.estimate(100)[0] == 0.0  # its expected text all guarded
    stream.release()  # the stream ended
    assert queue.reserved == 0 and queue.request_chars == 300.0


def test_every_guarded_tenant_reserves_a_place_the_others_see(service: GuardService) -> None:
    queue = service.parts.queue
    queue.recent_s = 0.1
    unheld = local_policy("u", on_overload="unverified")
    rejecting = local_policy("r", on_overload="reject")
    off = local_policy("z", guard=False)

    async def go() -> list[int]:
        seen = []
        for policy in (unheld, rejecting, off):
            async with service.arrival(policy):
                seen.append(queue.reserved)
        return seen

    assert anyio.run(go) == [1, 1, 0]
    assert queue.reserved == 0
