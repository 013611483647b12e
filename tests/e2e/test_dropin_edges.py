"""Issue 41, drop-in edges 1, 2 and 4, end to end: the real ``groundproxy serve`` process and
the fake upstream process, driven by the official ``openai`` SDK (``OpenAI`` and
``AzureOpenAI``).

1. A JSON answer whose schema does not type a field is corrected in place; a correction the
   schema forbids is never reported as made (the claim is flagged, a note says why) — in
   JSON, buffer and sentence streams and /v1/responses ``text.format``.
2. The ``AzureOpenAI`` client works unchanged: ``/openai/deployments/{deployment}/...``.
4. An answer nobody checked says ``n/a``, never ``0.00``; the inspector shows the trust the
   body reported (null with no claims).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from groundproxy.testing.processes import (
    free_port,
    start_fake_upstream,
    start_proxy,
    stop_process,
)
from tests.conftest import ADMIN_KEYS, KEYS, UPSTREAM_SCRIPT, _policy, share_index

pytestmark = pytest.mark.slow
SHEET = "Give the product sheet as JSON."
WARRANTY = "Acme vacuum robot warranty_months: 24 months."
PRICE = "Acme R3 price_eur: 699 euros."
MODELS = {
    "gpt-4o-mini": "openai/gpt-4o-mini",
    "gpt-3.5-turbo-instruct": "text-completion-openai/gpt-3.5-turbo-instruct",
    # Azure deployments, as the tenant names them
    "chat-deploy": "openai/gpt-4o-mini",
    "instruct-deploy": "text-completion-openai/gpt-3.5-turbo-instruct",
    "embed-deploy": "openai/text-embedding-3-small",
}


@pytest.fixture(scope="module")
def upstream_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The tests' scripted upstream, plus an answer with no claims (an empty one)."""
    script = {**UPSTREAM_SCRIPT, "rules": [{"match": "say nothing", "answer": ""},
                                           *UPSTREAM_SCRIPT["rules"]]}  # fmt: skip
    path = tmp_path_factory.mktemp("dropin-upstream") / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    port = free_port()
    proc: subprocess.Popen[bytes] = start_fake_upstream(port, path)
    try:
        yield port
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def proxy(
    data_dir: Path, upstream_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    policies = tmp_path_factory.mktemp("dropin-policies")
    specs: dict[str, dict[str, Any]] = {
        "acme": _policy("acme", upstream_port, upstream={"models": MODELS}),
        "sentence": _policy(
            "sentence",
            upstream_port,
            retrieval={"index": "acme"},
            stream="sentence",
            upstream={"models": MODELS},
        ),
        "globex": _policy("globex", upstream_port, guard=False),
    }
    share_index(specs)
    for tenant, spec in specs.items():
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    log = tmp_path_factory.mktemp("dropin-log") / "proxy.log"
    port = free_port()
    proc: subprocess.Popen[bytes] = start_proxy(port, policies, data_dir, log_path=log)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def sdk(base: str, tenant: str = "acme") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=KEYS[tenant], max_retries=0, timeout=120)


def last_upstream(upstream_port: int) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(f"http://127.0.0.1:{upstream_port}/_last").json()
    return body


# --- 1. JSON answers: correct where the schema allows, never claim a correction not made ---


def _format(schema: dict[str, Any]) -> Any:
    return {"type": "json_schema", "json_schema": {"name": "sheet", "schema": schema}}


def _ask_json(base: str, mode: str, schema: dict[str, Any]) -> tuple[dict[str, Any], Any, str]:
    """(the JSON document, the groundproxy object, the action header or the object's)."""
    if mode == "responses":
        fmt: Any = {"type": "json_schema", "name": "sheet", "schema": schema}
        answered = sdk(base).responses.with_raw_response.create(
            model="gpt-4o-mini", input=SHEET, text={"format": fmt}
        )
        done = answered.parse()
        gp = (done.model_extra or {})["groundproxy"]
        return json.loads(done.output_text), gp, answered.headers["x-groundproxy-action"]
    messages: Any = [{"role": "user", "content": SHEET}]
    if mode == "json":
        raw = sdk(base).chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=messages, response_format=_format(schema)
        )
        completion = raw.parse()
        gp = (completion.model_extra or {})["groundproxy"]
        content = completion.choices[0].message.content or ""
        return json.loads(content), gp, raw.headers["x-groundproxy-action"]
    tenant = "sentence" if mode == "sentence" else "acme"
    with sdk(base, tenant).chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=messages, response_format=_format(schema), stream=True
    ) as streamed:
        header = streamed.headers.get("x-groundproxy-action")
        chunks = list(streamed.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    gp = (chunks[-1].model_extra or {})["groundproxy"]
    return json.loads(text), gp, header or gp["action"]


UNTYPED: dict[str, dict[str, Any]] = {
    "object": {"type": "object"},
    "empty": {},
    "other-properties": {"type": "object", "properties": {"product": {"type": "string"}}},
    "additional-true": {"type": "object", "additionalProperties": True},
}
MODES = ["json", "buffer-stream", "sentence", "responses"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", sorted(UNTYPED))
def test_a_field_the_schema_does_not_type_is_corrected(proxy: str, kind: str, mode: str) -> None:
    """Before: ``{"warranty_months": 24}`` came back while the header said ``rewrite`` and
    the claim ``corrected``."""
    doc, gp, action = _ask_json(proxy, mode, UNTYPED[kind])
    claims = {c["text"]: c for c in gp["claims"]}
    assert claims[WARRANTY]["verdict"] == "contradicted"
    assert claims[WARRANTY]["action"] == "corrected"
    assert doc["warranty_months"] == 12 and doc["models"][0]["price_eur"] == 599
    assert action == "rewrite" == gp["action"]
    assert not gp.get("notes")


MIN_20 = {"type": "object", "properties": {"warranty_months": {"type": "integer", "minimum": 20}}}
CLOSED = {**MIN_20, "additionalProperties": False}  # every other field is out of reach


@pytest.mark.parametrize("mode", MODES)
def test_a_correction_the_schema_forbids_is_flagged_not_called_corrected(
    proxy: str, mode: str
) -> None:
    doc, gp, action = _ask_json(proxy, mode, MIN_20)
    claims = {c["text"]: c for c in gp["claims"]}
    assert doc["warranty_months"] == 24  # 12 would break minimum: 20
    wrong = claims[WARRANTY]
    assert wrong["verdict"] == "contradicted" and wrong["action"] == "flagged"
    why = "not corrected: 12 would break the response schema at /warranty_months; flagged instead"
    assert why in wrong["explanation"] and why in gp["notes"]
    assert doc["models"][0]["price_eur"] == 599  # allowed: still corrected
    assert claims[PRICE]["action"] == "corrected" and action == "rewrite"


@pytest.mark.parametrize("mode", ["json", "sentence"])
def test_nothing_corrected_is_not_a_rewrite(proxy: str, mode: str) -> None:
    doc, gp, action = _ask_json(proxy, mode, CLOSED)
    assert doc["warranty_months"] == 24 and doc["models"][0]["price_eur"] == 699
    assert "corrected" not in {c["action"] for c in gp["claims"]}
    assert action == "flag" == gp["action"]


# --- 2. the AzureOpenAI client -------------------------------------------------------------


def azure(base: str, deployment: str | None = None) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(
        azure_endpoint=base,
        azure_deployment=deployment,
        api_key=KEYS["acme"],
        api_version="2024-10-21",
        max_retries=0,
        timeout=120,
    )


def test_azure_chat_completions_are_guarded(proxy: str, upstream_port: int) -> None:
    raw = azure(proxy, "chat-deploy").chat.completions.with_raw_response.create(
        model="ignored-by-azure",
        messages=[{"role": "user", "content": "How long is the warranty?"}],
    )
    completion = raw.parse()
    assert raw.headers["x-groundproxy-action"] == "rewrite"
    assert "12 months" in (completion.choices[0].message.content or "")
    assert last_upstream(upstream_port)["model"] == "gpt-4o-mini"  # chat-deploy's mapping


def test_azure_deployment_named_by_the_model_and_streamed(proxy: str, upstream_port: int) -> None:
    """Without ``azure_deployment`` the SDK puts the ``model`` in the path; an unmapped
    deployment goes to the tenant's default model."""
    with azure(proxy).chat.completions.with_streaming_response.create(
        model="some-deployment",
        stream=True,
        messages=[{"role": "user", "content": "How long is the warranty?"}],
    ) as response:
        assert response.headers["x-groundproxy-action"] == "rewrite"
        chunks = list(response.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "12 months" in text and "24 months" not in text
    assert (chunks[-1].model_extra or {})["groundproxy"]["claims"]
    assert last_upstream(upstream_port)["model"] == "gpt-4o-mini"  # the default model


def test_azure_completions_and_embeddings(proxy: str, upstream_port: int) -> None:
    raw = azure(proxy, "instruct-deploy").completions.with_raw_response.create(
        model="x", prompt="How long is the warranty?"
    )
    assert raw.headers["x-groundproxy-action"] == "rewrite"
    assert "12 months" in raw.parse().choices[0].text
    assert last_upstream(upstream_port)["model"] == "gpt-3.5-turbo-instruct"
    got = azure(proxy, "embed-deploy").embeddings.create(model="x", input=["a b", "c"])
    assert len(got.data) == 2 and got.data[0].embedding
    assert last_upstream(upstream_port)["model"] == "text-embedding-3-small"


def test_azure_errors_are_openai_errors(proxy: str) -> None:
    bad = openai.AzureOpenAI(
        azure_endpoint=proxy, api_key="sk-wrong", api_version="2024-10-21", max_retries=0
    )
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(
            model="chat-deploy", messages=[{"role": "user", "content": "hi"}]
        )


# --- 4. trust semantics ----------------------------------------------------------------------


def test_an_unchecked_answer_says_n_a_not_0(proxy: str) -> None:
    client = sdk(proxy, "globex")  # guard: false
    messages: Any = [{"role": "user", "content": "How long is the warranty?"}]
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages)
    assert raw.headers["x-groundproxy-action"] == "unverified"
    assert raw.headers["x-groundproxy-trust"] == "n/a"
    assert (raw.parse().model_extra or {})["groundproxy"]["trust"] is None
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=messages, stream=True
    ) as response:
        assert response.headers["x-groundproxy-trust"] == "n/a"
        chunks = list(response.parse())
    assert (chunks[-1].model_extra or {})["groundproxy"]["trust"] is None


def test_the_inspector_shows_the_trust_the_body_reported(proxy: str) -> None:
    raw = sdk(proxy).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Please say nothing."}]
    )
    gp = (raw.parse().model_extra or {})["groundproxy"]
    assert gp["claims"] == [] and gp["trust"] is None  # an empty answer: no claims
    step = raw.headers["x-groundproxy-step-id"]
    admin = {"authorization": f"Bearer {ADMIN_KEYS['acme']}"}
    listed = httpx.get(f"{proxy}/v1/groundproxy/ui/answers", params={"q": step}, headers=admin)
    assert listed.json()["data"][0]["trust"] is None  # before: 1.0
    one = httpx.get(f"{proxy}/v1/groundproxy/ui/answers/{step}", headers=admin).json()
    assert one["trust"] is None


def test_a_rule_contradicted_claim_is_sure(proxy: str) -> None:
    completion = sdk(proxy).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "How long is the warranty?"}]
    )
    claims = (completion.model_extra or {})["groundproxy"]["claims"]
    wrong = next(c for c in claims if "24 months" in c["text"])
    assert wrong["verdict"] == "contradicted" and wrong["correction"]  # a value rule's
    assert wrong["uncertainty"] == 0.0  # before: 1.0
