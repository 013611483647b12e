"""Shared fixtures: real embedder, a real on-disk index of the sample documents, a real
fake-upstream server process, and test tenants' policy files."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import free_port, start_fake_upstream, stop_process

SAMPLES = Path(__file__).resolve().parent.parent / "testing" / "samples"
# small seeded slices of ../shared/data, vendored (tests/data/README.md): no test reads ../shared
TEST_DATA = Path(__file__).resolve().parent / "data"

KEYS = {
    "acme": "sk-acme-test-key",
    "globex": "sk-globex-test-key",
    "strict": "sk-strict-test-key",
    "hasty": "sk-hasty-test-key",
    "fragile": "sk-fragile-test-key",
    "loose": "sk-loose-test-key",
    "blocky": "sk-blocky-test-key",
    "sentence": "sk-sentence-test-key",
    "sentblock": "sk-sentblock-test-key",
}
ADMIN_KEYS = {"acme": "sk-acme-admin-key", "globex": "sk-globex-admin-key"}
# a tenant adapter (embedhead) that accepts every answer: P(hallucinated) = sigmoid(-5)
ACCEPT_ALL: dict[str, Any] = {
    "features": ["trust"],
    "mean": [0.5],
    "scale": [1.0],
    "coef": [0.0],
    "intercept": -5.0,
    "threshold": 0.5,
    "verifier": "embedhead",
}

# a JSON answer whose numbers and date are wrong against testing/samples (12 months, 599
# euros, March 2024): tests/proxy/test_json_facts_api.py
PRODUCT_SHEET = json.dumps({
    "product": "Acme vacuum robot",
    "warranty_months": 24,
    "battery_warranty_months": 6,
    "models": [{"name": "Acme R3", "launched": "2023-03", "price_eur": 699}],
})  # fmt: skip

UPSTREAM_SCRIPT: dict[str, Any] = {
    "default": "I do not know.",
    "rules": [
        {
            "match": "warranty",
            "answer": "The Acme vacuum robot has a limited warranty of 24 months from the date of "
            "purchase. Batteries are covered for 6 months.",
        },
        {
            "match": "refund",
            "answer": "You can return an unused robot within 30 days of delivery "
            "for a full refund.",
        },
        {"match": "context question", "answer": "The meeting is on Tuesday at 10:00 in room 4."},
        {"match": "product sheet", "answer": PRODUCT_SHEET},
        {
            "match": "weather in",
            "answer": "Let me look that up.",
            "tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}],
        },
    ],
}


def _policy(tenant: str, upstream_port: int, **overrides: Any) -> dict[str, Any]:
    base = f"http://127.0.0.1:{upstream_port}/v1"
    models = {
        name: f"openai/{name}"
        for name in (
            "gpt-4o-mini",
            "fail-500",
            "fail-400",
            "fail-401",
            "fail-403",
            "fail-404",
            "fail-409",
            "fail-422",
            "bad-json",
            "cut-stream",
            "slow-3",
            "drip-0.02",
        )
    }
    policy: dict[str, Any] = {
        "tenant": tenant,
        "keys": [hash_key(KEYS[tenant])],
        "admin_keys": [hash_key(ADMIN_KEYS[tenant])] if tenant in ADMIN_KEYS else [],
        "upstream": {
            "model": "openai/gpt-4o-mini",
            "models": models,
            "api_base": base,
            "api_key_env": "TEST_UPSTREAM_KEY",
            "timeout_s": 10,
        },
        "latency_budget_ms": 20000,
        "stream": "buffer",  # sentence mode has its own tenants ("sentence", "sentblock")
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(policy.get(key), dict):
            policy[key] = {**policy[key], **value}
        else:
            policy[key] = value
    return policy


def share_index(specs: dict[str, dict[str, Any]]) -> None:
    """Tenants on one index list each other (and its owner) in ``retrieval.shared_with``:
    an index belongs to one tenant unless both policies say it is shared (policies.sharing)."""
    users: dict[str, set[str]] = {}
    for tenant, spec in specs.items():
        users.setdefault(spec.get("retrieval", {}).get("index") or tenant, set()).add(tenant)
    for index, tenants in users.items():
        parties = tenants | ({index} if index in specs else set())
        if len(parties) < 2:
            continue
        for tenant in parties:
            retrieval = specs[tenant].setdefault("retrieval", {})
            retrieval["shared_with"] = sorted(parties - {tenant})


def share_index_files(directory: Path) -> None:
    """:func:`share_index` for the policy files already written in ``directory``."""
    files = {p.stem: p for p in sorted(directory.glob("*.yaml"))}
    specs = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in files.values()}
    by_tenant = {spec["tenant"]: spec for spec in specs.values()}
    share_index(by_tenant)
    for stem, path in files.items():
        path.write_text(yaml.safe_dump(specs[stem]), encoding="utf-8")


@pytest.fixture(scope="session")
def upstream_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    script = tmp_path_factory.mktemp("upstream") / "script.json"
    script.write_text(json.dumps(UPSTREAM_SCRIPT), encoding="utf-8")
    proc: subprocess.Popen[bytes] = start_fake_upstream(port, script)
    try:
        yield port
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def policies_dir(tmp_path_factory: pytest.TempPathFactory, upstream_port: int) -> Path:
    d = tmp_path_factory.mktemp("policies")
    specs = {
        "acme": _policy("acme", upstream_port),
        "globex": _policy("globex", upstream_port),
        "strict": _policy(
            "strict",
            upstream_port,
            upstream={"restrict_models": True, "models": {"gpt-4o-mini": "openai/gpt-4o-mini"}},
        ),
        "hasty": _policy("hasty", upstream_port, upstream={"timeout_s": 1}),
        "fragile": _policy(
            "fragile", upstream_port, on_guard_error="block", verifier={"model": "no-such-verifier"}
        ),
        "loose": _policy("loose", upstream_port, verifier={"model": "no-such-verifier"}),
        "blocky": _policy(
            "blocky", upstream_port, retrieval={"index": "acme"}, actions={"contradicted": "block"}
        ),
        "sentence": _policy(
            "sentence", upstream_port, retrieval={"index": "acme"}, stream="sentence"
        ),
        "sentblock": _policy(
            "sentblock",
            upstream_port,
            retrieval={"index": "acme"},
            stream="sentence",
            actions={"contradicted": "block"},
        ),
    }
    share_index(specs)
    for tenant, spec in specs.items():
        (d / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return d


@pytest.fixture(scope="session")
def embedder() -> Any:
    from groundproxy.retrieval.embedder import load_embedder

    return load_embedder()


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    """A real on-disk index: acme holds the sample docs, globex a near-identical twin."""
    from groundproxy.retrieval.ingest import ingest_paths, ingest_texts

    d = tmp_path_factory.mktemp("data")
    ingest_paths(
        d,
        "acme",
        [SAMPLES / "handbook.md", SAMPLES / "products.md", SAMPLES / "privacy.html"],
        embedder,
        progress=False,
    )
    twin = (SAMPLES / "handbook.md").read_text(encoding="utf-8").replace("12 months", "36 months")
    ingest_texts(d, "globex", [("globex-handbook.md", twin)], embedder)
    return d


@pytest.fixture(scope="session", autouse=True)
def _every_in_process_answer_matches_the_spec() -> Iterator[None]:
    """Every answer an in-process test gets from the app (``httpx.ASGITransport``) is checked
    against OpenAI's spec as it arrives (:func:`tests.spec_check.check_exchange`): each OpenAI
    route's bodies and stream events, and every JSON error. A shape bug fails the test that
    produced it, whatever that test asserts."""
    import httpx

    from tests.spec_check import check_exchange

    original = httpx.ASGITransport.handle_async_request

    async def checked(self: httpx.ASGITransport, request: httpx.Request) -> httpx.Response:
        response = await original(self, request)
        body = await response.aread()
        kind = response.headers.get("content-type", "")
        check_exchange(request.method, request.url.path, response.status_code, kind, body)
        return httpx.Response(
            response.status_code, headers=response.headers, content=body, request=request
        )

    httpx.ASGITransport.handle_async_request = checked  # type: ignore[method-assign]
    try:
        yield
    finally:
        httpx.ASGITransport.handle_async_request = original  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _structlog_defaults_after_cli_tests() -> Iterator[None]:
    """A test that runs the CLI's ``main`` configures structlog to print to the sys.stderr of
    that moment: pytest's capture stream, closed after the test. Restore the defaults so
    later tests don't log into a closed file."""
    yield
    import structlog

    if structlog.is_configured():
        structlog.reset_defaults()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How many answers this run validated against OpenAI's spec, per schema (a violation
    fails the test that got it, so every one counted here was clean)."""
    from tests.spec_check import CHECKED

    if CHECKED:
        total = sum(CHECKED.values())
        each = ", ".join(f"{name} {n}" for name, n in sorted(CHECKED.items()))
        terminalreporter.write_line(
            f"OpenAI spec: {total} bodies / events validated clean ({each}); a violation "
            "fails the test that got it"
        )
