"""Micro-batching across concurrent callers (models.batching) and its wiring in GuardService."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import httpx
import numpy as np
import numpy.typing as npt
import pytest

from groundproxy.errors import GuardError
from groundproxy.models.batching import BatchingEmbedder, BatchOptions, MicroBatcher
from groundproxy.policies.schema import local_policy
from groundproxy.proxy.app import build_app
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.testing.embedders import HashingEmbedder
from tests.conftest import KEYS


class FakeModel:
    """Doubles each number; records every batch; fails on a batch holding ``-1``."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.batches: list[list[int]] = []
        self.threads: set[str] = set()
        self.delay_s = delay_s
        self._lock = threading.Lock()

    def __call__(self, items: list[int]) -> list[int]:
        with self._lock:
            self.batches.append(list(items))
            self.threads.add(threading.current_thread().name)
        time.sleep(self.delay_s)
        if -1 in items:
            raise ValueError("bad item -1")
        return [2 * x for x in items]


def split(result: list[int], start: int, stop: int) -> list[int]:
    return result[start:stop]


def run_concurrently(
    n: int, call: Callable[[int], list[int]]
) -> tuple[dict[int, list[int]], dict[int, BaseException]]:
    results: dict[int, list[int]] = {}
    errors: dict[int, BaseException] = {}
    start = threading.Barrier(n)

    def worker(i: int) -> None:
        start.wait()
        try:
            results[i] = call(i)
        except BaseException as exc:
            errors[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    return results, errors


def test_concurrent_calls_share_batches_and_get_their_own_results() -> None:
    model, sizes = FakeModel(delay_s=0.01), list[int]()
    b = MicroBatcher(model, split, BatchOptions(window_s=0.05, max_items=64, observe=sizes.append))
    results, errors = run_concurrently(16, lambda i: b.submit([i, 100 + i]))
    assert not errors
    assert results == {i: [2 * i, 200 + 2 * i] for i in range(16)}
    assert len(model.batches) < 16  # merged: fewer model calls than callers
    assert max(sizes) > 2 and sum(sizes) == 32 and sizes == [len(x) for x in model.batches]
    b.close()


def test_batches_never_exceed_max_items() -> None:
    model = FakeModel(delay_s=0.005)
    b = MicroBatcher(model, split, BatchOptions(window_s=0.05, max_items=5))
    results, errors = run_concurrently(12, lambda i: b.submit([i, i]))
    assert not errors and all(results[i] == [2 * i, 2 * i] for i in range(12))
    assert max(len(x) for x in model.batches) <= 5
    assert b.submit(list(range(9))) == [2 * x for x in range(9)]  # one big call still runs
    b.close()


def test_errors_reach_exactly_the_callers_whose_input_fails() -> None:
    model = FakeModel(delay_s=0.01)
    b = MicroBatcher(model, split, BatchOptions(window_s=0.05, max_items=64))
    results, errors = run_concurrently(8, lambda i: b.submit([-1] if i == 3 else [i]))
    assert set(errors) == {3} and isinstance(errors[3], ValueError)
    assert results == {i: [2 * i] for i in range(8) if i != 3}
    b.close()


def test_window_zero_calls_in_the_callers_thread_unbatched() -> None:
    model = FakeModel()
    b = MicroBatcher(model, split, BatchOptions(window_s=0.0))
    results, errors = run_concurrently(6, lambda i: b.submit([i]))
    assert not errors and results == {i: [2 * i] for i in range(6)}
    assert sorted(model.batches) == [[i] for i in range(6)]
    assert not any(name.endswith("-worker") for name in model.threads)
    with pytest.raises(ValueError, match="bad item"):
        b.submit([-1])


def test_a_lone_caller_does_not_wait_for_the_window() -> None:
    model = FakeModel()
    b = MicroBatcher(model, split, BatchOptions(window_s=5.0, peers=lambda: 1))
    t = time.perf_counter()
    assert b.submit([4]) == [8]
    assert time.perf_counter() - t < 2.5  # far below the 5 s window: it did not wait
    b.close()


def test_close_fails_queued_calls_and_refuses_new_ones_without_hanging() -> None:
    release = threading.Event()

    def stuck(items: list[int]) -> list[int]:
        release.wait(5)
        return items

    b = MicroBatcher(stuck, split, BatchOptions(window_s=0.001, max_items=1))
    results, errors = {}, {}

    def call(i: int) -> None:
        try:
            results[i] = b.submit([i])
        except GuardError as exc:
            errors[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    threads[0].start()
    time.sleep(0.05)  # the first call is in flight, the next two queue behind it
    threads[1].start()
    threads[2].start()
    time.sleep(0.05)
    closer = threading.Thread(target=b.close, kwargs={"timeout_s": 5})
    closer.start()
    release.set()
    for t in [*threads, closer]:
        t.join(5)
        assert not t.is_alive()
    assert results == {0: [0]} and set(errors) == {1, 2}
    with pytest.raises(GuardError, match="closed"):
        b.submit([9])


class CountingEmbedder:
    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.calls: list[int] = []

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(len(texts))
        time.sleep(0.005)
        return self.inner.encode(texts)


def test_batching_embedder_returns_the_same_vectors() -> None:
    inner = CountingEmbedder()
    emb = BatchingEmbedder(inner, BatchOptions(window_s=0.02))
    texts = [[f"claim {i} about warranty", f"second {i}"] for i in range(10)]
    results, errors = run_concurrently(10, lambda i: emb.encode(texts[i]).tolist())
    assert not errors and len(inner.calls) < 10
    for i in range(10):
        np.testing.assert_array_equal(np.asarray(results[i]), inner.inner.encode(texts[i]))
    assert emb.encode([]).shape == (0, inner.dim) and emb.name == inner.name
    emb.close()


def _histogram_count(model: str, metrics: Metrics) -> float:
    for metric in metrics.registry.collect():
        for s in metric.samples:
            if s.name == "groundproxy_batch_size_count" and s.labels.get("model") == model:
                return s.value
    return 0.0


def test_guard_service_batches_and_reports_batch_sizes(tmp_path: Path) -> None:
    metrics = Metrics()
    service = build_guard(
        Settings(data=tmp_path, batch_window_ms=20), embedder=HashingEmbedder(), metrics=metrics
    )
    assert isinstance(service.parts.embedder, BatchingEmbedder)
    before = {m: _histogram_count(m, metrics) for m in ("embedder", "verifier")}
    policy = local_policy("t1", "x", verifier={"model": "lexical"}, latency_budget_ms=60_000)
    context = [("system", "The warranty lasts 12 months from purchase.")]

    async def many() -> list[str]:
        out: list[str] = []

        async def one(i: int) -> None:
            report = await service.guard(
                f"The warranty lasts {i} months.", "How long?", context, policy
            )
            out.append(report.action)

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, i)
        return out

    actions = anyio.run(many)
    assert len(actions) == 8 and "unverified" not in actions
    assert _histogram_count("embedder", metrics) > before["embedder"]
    assert _histogram_count("verifier", metrics) > before["verifier"]
    service.close()
    off = build_guard(Settings(data=tmp_path, batch_window_ms=0), embedder=HashingEmbedder())
    assert isinstance(off.parts.embedder, HashingEmbedder)


async def test_server_with_batching_on_answers_concurrent_requests(
    policies_dir: Path, data_dir: Path
) -> None:
    """The real app (lifespan, real ONNX embedder, real index) with a 5 ms window."""
    settings = Settings(
        policies=policies_dir, data=data_dir, watch_policies=False, batch_window_ms=5
    )
    app = build_app(settings)
    app_metrics = app.state.gp.metrics
    before = _histogram_count("embedder", app_metrics)
    headers = {"authorization": f"Bearer {KEYS['acme']}"}
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "How long is the laptop warranty?"}],
    }
    async with app.router.lifespan_context(app):
        assert isinstance(app.state.gp.served().deps.guard.parts.embedder, BatchingEmbedder)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            statuses: list[int] = []

            async def one() -> None:
                resp = await c.post("/v1/chat/completions", json=body, headers=headers)
                statuses.append(resp.status_code)
                assert "groundproxy" in resp.json(), resp.text

            async with anyio.create_task_group() as tg:
                for _ in range(6):
                    tg.start_soon(one)
            metrics = await c.get("/metrics")
    assert statuses == [200] * 6
    assert _histogram_count("embedder", app_metrics) > before
    assert metrics.status_code == 200
    assert 'groundproxy_batch_size_count{model="embedder"}' in metrics.text
