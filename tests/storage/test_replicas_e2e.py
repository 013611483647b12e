"""Two real `groundproxy serve` replicas on one PostgreSQL (each with its own, unshared
--data folder): a document ingested through replica 1's admin API is cited by an answer
from replica 2; a traced three-step pipeline with steps on both replicas names its error
step through the trace API of either replica; labels posted to either replica are fitted
by the CLI and the adapter is served by both. Policy files are shared by path."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.testing.pg import PgServer
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process
from tests.traces_pipeline import DOCS, SCRIPT, step_messages

pytestmark = pytest.mark.slow

KEY, ADMIN = "sk-replica-test-key", "sk-replica-admin-key"
SHARED: dict[str, object] = {}  # the database URL and policies folder the replicas use
HANDBOOK = "Unused robots can be returned within 30 days of delivery for a full refund."
REFUND = "You can return an unused robot within 30 days of delivery for a full refund."


@pytest.fixture(scope="module")
def replicas(
    tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer
) -> Iterator[tuple[str, str]]:
    root = tmp_path_factory.mktemp("replicas")
    dsn = pg_server.create_database()
    up_port = free_port()
    script = {**SCRIPT, "rules": [*SCRIPT["rules"], {"match": "refund", "answer": REFUND}]}
    (root / "script.json").write_text(json.dumps(script), encoding="utf-8")
    policies = root / "policies"
    policies.mkdir()
    spec = {
        "tenant": "team",
        "keys": [hash_key(KEY)],
        "admin_keys": [hash_key(ADMIN)],
        "upstream": {
            "model": "openai/gpt-4o-mini",
            "api_base": f"http://127.0.0.1:{up_port}/v1",
            "api_key_env": "TEST_UPSTREAM_KEY",
            "timeout_s": 10,
        },
        "actions": {"contradicted": "flag"},
        "traces": {"enabled": True, "retention_hours": 24, "max_nodes": 1000},
        "latency_budget_ms": 20000,
    }
    (policies / "team.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    env = {"GROUNDPROXY_DATABASE_URL": dsn}
    SHARED.update(dsn=dsn, policies=policies, data=root / "fit-data")
    upstream = start_fake_upstream(up_port, root / "script.json")
    procs = []
    try:
        for n in (1, 2):
            port = free_port()
            procs.append(
                start_proxy(
                    port, policies, root / f"data{n}", env=env, log_path=root / f"replica{n}.log"
                )
            )
            procs[-1].url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
        yield procs[0].url, procs[1].url  # type: ignore[attr-defined]
    finally:
        for p in procs:
            stop_process(p)
        stop_process(upstream)
    for n in (1, 2):  # nothing of the index or traces on local disk
        assert not list(Path(root / f"data{n}").rglob("*.sqlite"))
        assert not list(Path(root / f"data{n}").rglob("CURRENT"))


def _chat(url: str, messages: list[dict[str, str]], headers: dict[str, str]) -> httpx.Response:
    resp = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": messages},
        headers={"authorization": f"Bearer {KEY}", **headers},
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    return resp


def test_ingest_on_one_replica_is_cited_by_the_other(replicas: tuple[str, str]) -> None:
    one, two = replicas
    admin = {"authorization": f"Bearer {ADMIN}"}
    docs = [{"id": "handbook.md", "text": HANDBOOK}, *({"id": d, "text": t} for d, t in DOCS)]
    resp = httpx.post(
        f"{one}/v1/groundproxy/documents", json={"documents": docs}, headers=admin, timeout=60
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["version"] == 1
    deadline = time.monotonic() + 2.0  # one poll interval (0.5 s) and then some
    while True:
        listed = httpx.get(f"{two}/v1/groundproxy/documents", headers=admin, timeout=30).json()
        if listed["version"] == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert listed["version"] == 1 and len(listed["data"]) == 3
    gp = _chat(two, [{"role": "user", "content": "Can I get a refund?"}], {}).json()["groundproxy"]
    cites = {c["doc"] for claim in gp["claims"] for c in claim["citations"]}
    assert "handbook.md" in cites, gp
    assert gp["claims"][0]["citations"][0]["index_version"] == 1


def test_pipeline_across_replicas_names_the_error_step(replicas: tuple[str, str]) -> None:
    one, two = replicas
    trace = {"x-groundproxy-trace-id": "replicated-pipeline"}

    def run(
        url: str, n: int, parents: list[str], inputs: list[str] | None = None
    ) -> tuple[str, str]:
        headers = dict(trace)
        if parents:
            headers["x-groundproxy-parent-ids"] = ",".join(parents)
        resp = _chat(url, step_messages(n, inputs), headers)
        return resp.headers["x-groundproxy-step-id"], resp.json()["choices"][0]["message"][
            "content"
        ]

    s1, out1 = run(one, 1, [])
    s2, out2 = run(one, 2, [])
    s3, final = run(two, 3, [s1, s2], [out1, out2])  # parents stored by the other replica
    assert "45 million" in final
    for url in (one, two):
        resp = httpx.get(
            f"{url}/v1/groundproxy/traces/replicated-pipeline",
            headers={"authorization": f"Bearer {KEY}"},
            timeout=60,
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert [n["step_id"] for n in body["nodes"]] == [s1, s2, s3]
        errors = {u["error_step"] for u in body["unsupported"] if "45 million" in u["claim"]}
        assert errors == {s2}, body["unsupported"]


CONTEXT = "The team meeting is on Tuesday at 10:00 in room {n}."
FINE = "The meeting is on Tuesday at 10:00 in room {n}. The coffee there is usually good."
WRONG = "The meeting is on Friday at 15:00 in room {n}."


def _check(url: str, answer: str, n: int) -> dict[str, object]:
    body = {"answer": answer, "question": "When is the meeting?", "context": [CONTEXT.format(n=n)]}
    resp = httpx.post(
        f"{url}/v1/groundproxy/check",
        json=body,
        headers={"authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    gp: dict[str, object] = resp.json()["groundproxy"]
    return gp


def test_labels_on_both_replicas_fit_one_adapter_served_by_both(
    replicas: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.e2e.adapter_serving import fit_adapter

    one, two = replicas
    assert "adapter" not in _check(two, FINE.format(n=42), 42)  # zero-shot: flagged
    admin = {"authorization": f"Bearer {ADMIN}"}
    count = 0
    for n in range(1, 13):  # each label through either replica: one shared store
        for url, answer, label in ((one, FINE, "supported"), (two, WRONG, "hallucinated")):
            row = {"answer": answer.format(n=n), "question": "When is the meeting?",
                   "context": [CONTEXT.format(n=n)], "label": label}  # fmt: skip
            resp = httpx.post(f"{url}/v1/groundproxy/feedback", json=row, headers=admin, timeout=60)
            assert resp.status_code == 200, resp.text
            count = resp.json()["count"]
    assert count == 24
    monkeypatch.setenv("GROUNDPROXY_DATABASE_URL", str(SHARED["dsn"]))
    data = Path(str(SHARED["data"]))
    content, _ = fit_adapter("team", data, Path(str(SHARED["policies"])))
    assert content["fit"]["n"] == 24 and "gp_adapters" in content["path"]
    assert not list(data.rglob("adapter*.json"))
    deadline = time.monotonic() + 3.0  # each replica re-reads the adapter within 1 s
    for url in (one, two):
        while True:
            gp = _check(url, FINE.format(n=77), 77)
            if "adapter" in gp or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        adapter = gp["adapter"]
        assert isinstance(adapter, dict) and adapter["version"] == 1, gp
        assert adapter["decision"] == "accept" and gp["action"] == "none"
        wrong = _check(url, WRONG.format(n=77), 77)["adapter"]
        assert isinstance(wrong, dict) and wrong["decision"] == "reject"


def _last_label() -> dict[str, object]:
    import psycopg

    with psycopg.connect(str(SHARED["dsn"])) as conn:
        row = conn.execute(
            "SELECT record FROM gp_feedback WHERE tenant = 'team' ORDER BY created DESC LIMIT 1"
        ).fetchone()
    assert row is not None
    return dict(row[0])


def test_a_label_by_request_id_binds_once_across_replicas(replicas: tuple[str, str]) -> None:
    """Issue 32: a label by request id, posted to the other replica, lands on the one answer
    with that id; once a second answer carries the id it is ambiguous (409) and the step id
    (the server's own) still names the first."""
    one, two = replicas
    admin = {"authorization": f"Bearer {ADMIN}"}
    rid = {"x-request-id": "rid-pg-shared-7"}
    first = _chat(one, [{"role": "user", "content": "Can I get a refund?"}], rid)
    step = first.headers["x-groundproxy-step-id"]

    def label(body: dict[str, str]) -> httpx.Response:
        return httpx.post(f"{two}/v1/groundproxy/feedback", json=body, headers=admin, timeout=60)

    r = label({"request_id": "rid-pg-shared-7", "label": "supported"})
    assert r.status_code == 200, r.text
    assert _last_label()["step_id"] == step
    _chat(two, [{"role": "user", "content": "Anything else?"}], rid)  # the same id again
    r = label({"request_id": "rid-pg-shared-7", "label": "hallucinated"})
    assert r.status_code == 409 and r.json()["error"]["param"] == "request_id", r.text
    r = label({"step_id": step, "label": "hallucinated"})
    assert r.status_code == 200, r.text
    last = _last_label()
    assert last["step_id"] == step and last["answer"] == REFUND, last
