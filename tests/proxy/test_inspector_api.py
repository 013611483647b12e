"""The verdict inspector's page and JSON (admin key, tenant scoped), in process: real app,
real lifespan, real on-disk index, real fake-upstream process; and its table in the
trace store (written with the node, pruned with it)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio

from groundproxy.guards.types import Claim, ClaimResult, GuardReport, Probs
from groundproxy.policies.schema import TracesPolicy
from groundproxy.proxy.storage.sqlite_traces import TraceStep, TraceStores
from tests.conftest import ADMIN_KEYS, KEYS
from tests.inprocess import app_client

UI = "/v1/groundproxy/ui"


@pytest_asyncio.fixture(scope="module")
async def client(policies_dir: Path, data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(policies_dir, data_dir) as c:
        yield c


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def test_page_and_assets_are_static_and_locked_down(client: httpx.AsyncClient) -> None:
    page = await client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert 'src="/ui/app.js"' in page.text and "http" not in page.text.replace(
        "http://www.w3.org/2000/svg", ""
    )  # nothing from elsewhere
    js = await client.get("/ui/app.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in js.text  # answer texts only ever become text nodes
    css = await client.get("/ui/app.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    missing = await client.get("/ui/secrets.txt")
    assert missing.status_code == 404 and set(missing.json()["error"]) == {
        "message",
        "type",
        "param",
        "code",
    }


async def test_recent_answer_in_full_and_searchable(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions",
        headers={**bearer(KEYS["acme"]), "x-request-id": "req-insp-1"},
        json={
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "How long is the warranty?"}],
        },
    )
    assert resp.status_code == 200, resp.text
    step = resp.headers["x-groundproxy-step-id"]
    listed = await client.get(f"{UI}/answers", headers=bearer(ADMIN_KEYS["acme"]))
    assert listed.status_code == 200, listed.text
    row = next(a for a in listed.json()["data"] if a["step_id"] == step)
    assert row["model"] == "gpt-4o-mini" and row["action"] == "rewrite"
    assert row["request_id"] == "req-insp-1" and row["counts"]["contradicted"] >= 1
    assert row["latency_ms"] is not None and row["latency_ms"] >= 0
    for q in ("req-insp-1", step, row["trace_id"]):
        found = await client.get(
            f"{UI}/answers", params={"q": q}, headers=bearer(ADMIN_KEYS["acme"])
        )
        assert [a["step_id"] for a in found.json()["data"]] == [step], q

    detail = (await client.get(f"{UI}/answers/{step}", headers=bearer(ADMIN_KEYS["acme"]))).json()
    assert "24 months" in detail["original"] and "24 months" not in detail["returned"]
    assert "12 months" in detail["returned"]
    bad = next(c for c in detail["claims"] if "24 months" in c["text"])
    assert bad["verdict"] == "contradicted" and bad["action"] == "corrected"
    assert set(bad["probs"]) == {"supported", "contradicted", "unverifiable"}
    assert abs(sum(bad["probs"].values()) - 1.0) < 0.01
    cite = bad["citations"][0]
    passage = await client.get(
        f"{UI}/documents/{cite['doc']}",
        params={"chunk": cite["chunk"]},
        headers=bearer(ADMIN_KEYS["acme"]),
    )
    assert passage.status_code == 200 and "12 months" in passage.json()["passage"]["text"]
    trace = await client.get(
        f"{UI}/traces/{detail['trace_id']}", headers=bearer(ADMIN_KEYS["acme"])
    )
    assert trace.status_code == 200 and trace.json()["nodes"][0]["step_id"] == step

    # A normal key of the same tenant: 403 from every endpoint the page reads.
    for path in (
        f"{UI}/answers",
        f"{UI}/answers/{step}",
        f"{UI}/traces/{detail['trace_id']}",
        f"{UI}/documents/{cite['doc']}",
    ):
        denied = await client.get(path, headers=bearer(KEYS["acme"]))
        assert denied.status_code == 403, path
        assert denied.json()["error"]["type"] == "permission_error"
    assert (await client.get(f"{UI}/answers")).status_code == 401
    # Another tenant's admin key: neither listed nor readable.
    other = await client.get(f"{UI}/answers", headers=bearer(ADMIN_KEYS["globex"]))
    assert step not in {a["step_id"] for a in other.json()["data"]}
    assert (
        await client.get(f"{UI}/answers/{step}", headers=bearer(ADMIN_KEYS["globex"]))
    ).status_code == 404


async def test_bad_query_parameters_are_openai_errors(client: httpx.AsyncClient) -> None:
    for params in ({"limit": "0"}, {"limit": "x"}, {"q": "x" * 200}):
        resp = await client.get(f"{UI}/answers", params=params, headers=bearer(ADMIN_KEYS["acme"]))
        assert resp.status_code == 400, params
        assert set(resp.json()["error"]) == {"message", "type", "param", "code"}


def _report(text: str) -> GuardReport:
    claim = ClaimResult(Claim(text, (0, len(text))), "contradicted", Probs(0.1, 0.8, 0.1), 0.5)
    return GuardReport(
        text, "fixed.", [claim], trust=0.1, action="rewrite", latency_ms=12.5, verifier="lexical"
    )


def test_answers_written_with_the_node_and_pruned_with_it(tmp_path: Path) -> None:
    stores = TraceStores(tmp_path)
    store = stores.get("acme")
    settings = TracesPolicy(retention_hours=1.0, max_nodes=2)
    for i in range(3):
        store.record(
            TraceStep(
                step_id=f"st_{i:016x}",
                trace_id="t",
                parents=[],
                request_id=f"r{i}",
                policy_id="acme@1",
                question=None,
                context=[],
                model="gpt-x",
            ),
            report=_report(f"c{i}."),
            settings=settings,
            now=1000.0 + i,
        )
    from groundproxy.proxy.storage import answers

    rows = store.read(lambda conn: answers.recent(conn, 0.0, 10))
    assert [a.step_id for a in rows] == [f"st_{i:016x}" for i in (2, 1, 0)]
    assert rows[0].model == "gpt-x" and rows[0].returned == "fixed." and rows[0].original == "c2."
    assert rows[0].claims[0]["probs"] == {
        "supported": 0.1,
        "contradicted": 0.8,
        "unverifiable": 0.1,
    }
    assert rows[0].latency_ms == 12.5 and rows[0].verifier == "lexical"
    assert store.prune(settings, now=1003.0) == 1
    stores.close()
    conn = sqlite3.connect(tmp_path / "acme" / "traces.sqlite")
    assert conn.execute("SELECT count(*) FROM answers").fetchone()[0] == 2
