"""``GET /metrics``: Prometheus text, who may read it, and what it counts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from groundproxy.proxy.app import build_app
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.settings import Settings
from tests.conftest import ADMIN_KEYS, KEYS


@pytest_asyncio.fixture(scope="module")
async def app(policies_dir: Path, data_dir: Path) -> AsyncIterator[FastAPI]:
    application = build_app(Settings(policies=policies_dir, data=data_dir, watch_policies=False))
    async with application.router.lifespan_context(application):
        yield application


def client_from(app: FastAPI, host: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(host, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``."""
    return sum(
        v for (n, ls), v in samples(text).items() if n == name and set(labels.items()) <= set(ls)
    )


async def test_metrics_count_requests_verdicts_and_latency(app: FastAPI) -> None:
    async with client_from(app, "127.0.0.1") as c:
        before = (await c.get("/metrics")).text
        resp = await c.post(
            "/v1/chat/completions",
            headers={"authorization": f"Bearer {KEYS['acme']}"},
            json={
                "model": "gpt-4o-mini",
                "messages": [{"role": "user", "content": "How long is the warranty?"}],
            },
        )
        assert resp.status_code == 200
        await c.post("/v1/chat/completions", json={})  # 401, before any tenant is known
        got = await c.get("/metrics")
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("text/plain")
    after = got.text

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("groundproxy_requests_total", tenant="acme", route="chat", status="200") == 1
    assert delta("groundproxy_requests_total", tenant="-", route="chat", status="401") == 1
    assert delta("groundproxy_verdicts_total", tenant="acme", verdict="contradicted") == 1
    assert delta("groundproxy_verdicts_total", tenant="acme") >= 2
    assert delta("groundproxy_actions_total", tenant="acme", action="rewrite") == 1
    assert delta("groundproxy_guard_seconds_count", tenant="acme") == 1
    assert delta("groundproxy_upstream_seconds_count", tenant="acme") == 1
    assert delta("groundproxy_request_seconds_count", route="chat") == 2
    assert "groundproxy_verifier_batch_size" in after
    # Metrics never carry prompts, answers or keys.
    for secret in (KEYS["acme"], "warranty", "24 months"):
        assert secret not in after


async def test_metrics_not_exposed_to_tenant_keys_from_outside(app: FastAPI) -> None:
    async with client_from(app, "10.1.2.3") as c:
        assert (await c.get("/metrics")).status_code == 401
        tenant = await c.get("/metrics", headers={"authorization": f"Bearer {KEYS['acme']}"})
        assert tenant.status_code == 403
        assert tenant.json()["error"]["type"] == "permission_error"
        wrong = await c.get("/metrics", headers={"authorization": "Bearer sk-nope"})
        assert wrong.status_code == 401
        admin = await c.get("/metrics", headers={"authorization": f"Bearer {ADMIN_KEYS['acme']}"})
        assert admin.status_code == 200 and "groundproxy_requests_total" in admin.text


async def test_metrics_public_when_configured(policies_dir: Path, data_dir: Path) -> None:
    application = build_app(
        Settings(policies=policies_dir, data=data_dir, watch_policies=False, metrics_public=True)
    )
    async with (
        application.router.lifespan_context(application),
        client_from(application, "10.1.2.3") as c,
    ):
        assert (await c.get("/metrics")).status_code == 200


def test_cache_stats_are_read_at_scrape_time() -> None:
    class Cache:
        def __init__(self) -> None:
            self.hits, self.misses = 0, 0

        def stats(self) -> dict[str, int]:
            return {"hits": self.hits, "misses": self.misses, "size": 7}

    cache = Cache()
    metrics = Metrics()  # an app's metrics: no module global
    metrics.register_cache("test-cache", lambda: cache)
    cache.hits, cache.misses = 3, 1
    text = metrics.render().decode()
    # counters (rate() applies), named with _total; before: gauges named without it
    assert value(text, "groundproxy_cache_hits_total", cache="test-cache") == 3
    assert value(text, "groundproxy_cache_misses_total", cache="test-cache") == 1
    assert "# TYPE groundproxy_cache_hits_total counter" in text
    assert "# TYPE groundproxy_cache_misses_total counter" in text
    assert value(text, "groundproxy_cache_hit_ratio", cache="test-cache") == 0.75
    assert value(text, "groundproxy_cache_entries", cache="test-cache") == 7
    metrics.observe_batch(5)
    text = metrics.render().decode()
    assert value(text, "groundproxy_verifier_batch_size_count") >= 1
    assert "test-cache" not in Metrics().render().decode()  # each app has its own
