"""Traces, provenance and calibrated thresholds through the real app in process
(httpx.ASGITransport): real lifespan, embedder, on-disk index and lexical verifier; a real
scripted upstream process answers the three pipeline steps."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml

from groundproxy.proxy.app import build_app
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.calibration import write_calibration
from groundproxy.testing.processes import free_port, start_fake_upstream, stop_process
from tests.conftest import ADMIN_KEYS, KEYS, share_index_files
from tests.traces_pipeline import DOCS, PART_B, SCRIPT, step_messages

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

STEP = "x-groundproxy-step-id"


@pytest.fixture(scope="module")
def trace_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    script = tmp_path_factory.mktemp("trace-upstream") / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    proc: subprocess.Popen[bytes] = start_fake_upstream(port, script)
    try:
        yield port
    finally:
        stop_process(proc)


def trace_policies(root: Path, upstream_port: int) -> Path:
    from groundproxy.policies.keys import hash_key

    d = root / "policies"
    d.mkdir()
    tenants: dict[str, dict[str, Any]] = {
        "acme": {},  # contradicted → rewrite: a wrong number is corrected before it travels on
        "globex": {"traces": {"enabled": True, "max_nodes": 50}},
        # contradicted → flag: the wrong number travels on to the next step (marked)
        "loose": {"retrieval": {"index": "acme"}, "actions": {"contradicted": "flag"}},
        # verifier.threshold: calibrated — "strict" has no calibration file, "hasty" has one
        "strict": {"retrieval": {"index": "acme"}, "verifier": {"threshold": "calibrated"}},
        "hasty": {"retrieval": {"index": "acme"}, "verifier": {"threshold": "calibrated"}},
    }
    for tenant, extra in tenants.items():
        spec: dict[str, Any] = {
            "tenant": tenant,
            "keys": [hash_key(KEYS[tenant])],
            "admin_keys": [hash_key(ADMIN_KEYS[tenant])] if tenant in ADMIN_KEYS else [],
            "upstream": {
                "model": "openai/gpt-4o-mini",
                "api_base": f"http://127.0.0.1:{upstream_port}/v1",
                "api_key_env": "TEST_UPSTREAM_KEY",
                "timeout_s": 10,
            },
            "latency_budget_ms": 20000,
            **extra,
            # the trace walk-back is under test, not the verifier: pin the lexical one, whose
            # verdicts on these hand-written steps the assertions spell out
            "verifier": {"model": "lexical", **extra.get("verifier", {})},
        }
        (d / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    share_index_files(d)
    return d


def trace_data(root: Path, embedder: Any) -> Path:
    from groundproxy.retrieval.ingest import ingest_texts

    d = root / "data"
    ingest_texts(d, "acme", DOCS, embedder)
    ingest_texts(d, "globex", [("globex-only.md", "Globex sells 7 kinds of widgets.")], embedder)
    write_calibration(
        d,
        "hasty",
        {"alpha": 0.1, "threshold": 0.99, "n": 40, "verifier": "lexical", "created": "test"},
    )
    return d


@pytest_asyncio.fixture(scope="module")
async def tclient(
    tmp_path_factory: pytest.TempPathFactory, trace_upstream: int, embedder: Any
) -> AsyncIterator[httpx.AsyncClient]:
    root = tmp_path_factory.mktemp("traces")
    settings = Settings(
        policies=trace_policies(root, trace_upstream),
        data=trace_data(root, embedder),
        watch_policies=False,
    )
    app = build_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            yield c


def auth(tenant: str = "acme", **headers: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[tenant]}", **headers}


async def step(
    c: httpx.AsyncClient,
    n: int,
    trace: str,
    parents: list[str],
    inputs: list[str] | None = None,
    tenant: str = "acme",
) -> httpx.Response:
    headers = auth(tenant, **{"x-groundproxy-trace-id": trace})
    if parents:
        headers["x-groundproxy-parent-ids"] = ",".join(parents)
    body = {"model": "gpt-4o-mini", "messages": step_messages(n, inputs)}
    resp = await c.post("/v1/chat/completions", json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    return resp


async def run_pipeline(c: httpx.AsyncClient, trace: str, tenant: str = "acme") -> list[str]:
    r1 = await step(c, 1, trace, [], tenant=tenant)
    r2 = await step(c, 2, trace, [], tenant=tenant)
    s1, s2 = r1.headers["x-groundproxy-step-id"], r2.headers["x-groundproxy-step-id"]
    # Step 3's input is what steps 1 and 2 returned (the guarded, client-visible texts).
    outputs = [r.json()["choices"][0]["message"]["content"] for r in (r1, r2)]
    r3 = await step(c, 3, trace, [s1, s2], outputs, tenant=tenant)
    final = r3.json()["groundproxy"]["claims"]
    assert any("45 million" in cl["text"] for cl in final)
    assert r3.headers["x-groundproxy-trace-id"] == trace
    return [s1, s2, r3.headers["x-groundproxy-step-id"]]


async def test_three_step_pipeline_names_step_2(tclient: httpx.AsyncClient) -> None:
    """Step 2 turns 40 into 45 million; the policy only flags it, so the pipeline passes
    the wrong number on and the final answer repeats it: step 2 is the error stage."""
    s1, s2, s3 = await run_pipeline(tclient, "pipe-1", tenant="loose")
    resp = await tclient.get("/v1/groundproxy/traces/pipe-1", headers=auth("loose"))
    assert resp.status_code == 200, resp.text
    trace = resp.json()
    assert trace["trace_id"] == "pipe-1" and trace["final_step"] == s3
    nodes = {n["step_id"]: n for n in trace["nodes"]}
    assert set(nodes) == {s1, s2, s3}
    assert nodes[s3]["parents"] == [s1, s2] and nodes[s1]["parents"] == []
    assert all(n["claims"] for n in nodes.values())
    assert "answer" in nodes[s1] and len(nodes[s1]["context_sha256"]) == 64
    wrong = [u for u in trace["unsupported"] if "45 million" in u["claim"]]
    assert len(wrong) == 1, trace["unsupported"]
    assert wrong[0]["error_step"] == s2
    assert wrong[0]["verdict"] == "contradicted"
    assert "40 million" in wrong[0]["explanation"]
    assert wrong[0]["path"][0] == s3 and wrong[0]["path"][-1] == s2
    # The right claims (warehouse, 120 people) trace back to grounded content.
    assert all(u["error_step"] == s2 for u in trace["unsupported"]), trace["unsupported"]


async def test_corrected_step_2_puts_the_blame_on_step_3(tclient: httpx.AsyncClient) -> None:
    """With contradicted → rewrite, step 2's client got "40 million": the pipeline passed
    the right number on, so the scripted final "45 million" is step 3's own error."""
    _, s2, s3 = await run_pipeline(tclient, "pipe-rw")
    trace = (await tclient.get("/v1/groundproxy/traces/pipe-rw", headers=auth())).json()
    wrong = [u for u in trace["unsupported"] if "45 million" in u["claim"]]
    assert [u["error_step"] for u in wrong] == [s3], trace["unsupported"]
    assert wrong[0]["final_verdict"] == "contradicted"
    step2 = next(n for n in trace["nodes"] if n["step_id"] == s2)
    assert any(c["action"] == "corrected" for c in step2["claims"])


async def test_trace_is_tenant_scoped(tclient: httpx.AsyncClient) -> None:
    await run_pipeline(tclient, "pipe-private")
    other = await tclient.get("/v1/groundproxy/traces/pipe-private", headers=auth("globex"))
    assert other.status_code == 404
    assert other.json()["error"]["type"] == "not_found_error"
    assert (await tclient.get("/v1/groundproxy/traces/pipe-private")).status_code == 401
    # An admin key of the owner may read it too.
    admin = {"authorization": f"Bearer {ADMIN_KEYS['acme']}"}
    assert (await tclient.get("/v1/groundproxy/traces/pipe-private", headers=admin)).is_success


async def test_parent_ids_are_checked(tclient: httpx.AsyncClient) -> None:
    body = {"model": "gpt-4o-mini", "messages": step_messages(1)}
    bad = await tclient.post(
        "/v1/chat/completions",
        json=body,
        headers=auth(**{"x-groundproxy-parent-ids": "not-a-step"}),
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "x-groundproxy-parent-ids"
    unknown = await tclient.post(
        "/v1/chat/completions",
        json=body,
        headers=auth(**{"x-groundproxy-parent-ids": "st_0123456789abcdef"}),
    )
    assert unknown.status_code == 400
    # Another tenant's step id is unknown here, too.
    mine = await step(tclient, 1, "pipe-x", [])
    theirs = await tclient.post(
        "/v1/chat/completions",
        json=body,
        headers=auth("globex", **{"x-groundproxy-parent-ids": mine.headers[STEP]}),
    )
    assert theirs.status_code == 400
    bad_trace = await tclient.post(
        "/v1/chat/completions", json=body, headers=auth(**{"x-groundproxy-trace-id": "bad id!"})
    )
    assert bad_trace.status_code == 400


async def test_step_without_trace_id_joins_its_parents_trace(tclient: httpx.AsyncClient) -> None:
    first = await step(tclient, 1, "pipe-join", [])
    sid = first.headers["x-groundproxy-step-id"]
    body = {"model": "gpt-4o-mini", "messages": step_messages(2)}
    child = await tclient.post(
        "/v1/chat/completions", json=body, headers=auth(**{"x-groundproxy-parent-ids": sid})
    )
    assert child.headers["x-groundproxy-trace-id"] == "pipe-join"


async def test_citations_carry_provenance_and_resolve(tclient: httpx.AsyncClient) -> None:
    resp = await step(tclient, 2, "pipe-prov", [])
    claims = resp.json()["groundproxy"]["claims"]
    cites = [c for cl in claims for c in cl["citations"] if not c["doc"].startswith("request:")]
    assert cites, claims
    cite = cites[0]
    assert cite["doc"] == "reports/part-b.md"
    assert len(cite["content_hash"]) >= 16 and cite["index_version"] >= 1
    doc = await tclient.get(f"/v1/groundproxy/documents/{cite['doc']}", headers=auth())
    assert doc.status_code == 200, doc.text
    meta = doc.json()
    assert meta["id"] == "reports/part-b.md" and meta["index_version"] == cite["index_version"]
    assert meta["length"] == len(PART_B)
    chunk = meta["chunks"][0]
    start, end = cite["span"]
    passage = await tclient.get(
        f"/v1/groundproxy/documents/{cite['doc']}",
        params={"start": start, "end": end},
        headers=auth(),
    )
    assert passage.json()["passage"]["text"] == cite["quote"] == PART_B[start:end]
    by_chunk = await tclient.get(
        f"/v1/groundproxy/documents/{cite['doc']}", params={"chunk": cite["chunk"]}, headers=auth()
    )
    got = by_chunk.json()["passage"]
    assert got["content_hash"] == cite["content_hash"]
    assert cite["quote"] in got["text"] and got["chunk"] == chunk["chunk"]


async def test_documents_are_tenant_scoped(tclient: httpx.AsyncClient) -> None:
    path = "/v1/groundproxy/documents/reports/part-b.md"
    assert (await tclient.get(path, headers=auth("globex"))).status_code == 404
    missing = await tclient.get("/v1/groundproxy/documents/no-such.md", headers=auth())
    assert missing.status_code == 404
    # globex's own document exists, but not for acme: the same 404, nothing leaks.
    theirs = await tclient.get("/v1/groundproxy/documents/globex-only.md", headers=auth())
    assert theirs.status_code == 404 and theirs.json() == missing.json() | {
        "error": {**missing.json()["error"], "message": theirs.json()["error"]["message"]}
    }
    backwards = await tclient.get(path, headers=auth(), params={"start": 5, "end": 2})
    assert backwards.status_code == 400
    assert (await tclient.get(path, headers=auth(), params={"chunk": "c99"})).status_code == 404
    assert (await tclient.get(path)).status_code == 401


async def test_calibrated_threshold_without_file_fails_visibly(tclient: httpx.AsyncClient) -> None:
    body = {"model": "gpt-4o-mini", "messages": step_messages(1)}
    resp = await tclient.post("/v1/chat/completions", json=body, headers=auth("strict"))
    assert resp.status_code == 200
    gp = resp.json()["groundproxy"]
    assert resp.headers["x-groundproxy-action"] == "unverified" and gp["unverified"] is True
    assert "calibration.json does not exist" in gp["claims"][0]["explanation"]
    assert "groundproxy calibrate" in gp["claims"][0]["explanation"]


async def test_calibrated_threshold_is_used(tclient: httpx.AsyncClient) -> None:
    """The same well-supported summary: supported at 0.6 (acme), not at the calibrated 0.99."""
    body = {"model": "gpt-4o-mini", "messages": step_messages(1)}
    plain = (await tclient.post("/v1/chat/completions", json=body, headers=auth())).json()
    assert all(c["verdict"] == "supported" for c in plain["groundproxy"]["claims"])
    resp = await tclient.post("/v1/chat/completions", json=body, headers=auth("hasty"))
    claims = resp.json()["groundproxy"]["claims"]
    assert all(c["verdict"] != "supported" for c in claims), claims
    assert any("below 0.99" in c["explanation"] for c in claims), claims
