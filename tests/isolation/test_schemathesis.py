"""schemathesis against the OpenAPI schema, in process (ASGI): no input gets a 5xx.

Every route (chat, models, readiness, the admin and provenance APIs) is called with the
right key, a key of the wrong kind (a client key on admin routes), another tenant's key,
a wrong key and none; seeded, so a run is repeatable. Besides the status, every response
must carry ``x-request-id`` and no body may hold a server path or the upstream key.

The chat and admin routes read their bodies by hand (size, depth and UTF-8 limits come
first), so FastAPI's schema has no request bodies for them; the test adds them from the
same pydantic models the routes validate with, so schemathesis generates real bodies.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, seed, settings
from pydantic import BaseModel
from schemathesis.python import asgi

from groundproxy.proxy.app import build_app
from groundproxy.proxy.openai.chat_request import ChatCompletionRequest
from groundproxy.proxy.routes.admin import DeleteBody, IngestBody
from groundproxy.proxy.settings import Settings
from groundproxy.testing.processes import REPO_ROOT
from tests.isolation.conftest import admin_key, key

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The upstream key the iso tenants' policies name (api_key_env): it must never leave.
UPSTREAM_KEY = "sk-fuzz-upstream-8d7c6b5a4f3e2d1c0b9a"
os.environ["TEST_UPSTREAM_KEY"] = UPSTREAM_KEY
MAX_EXAMPLES = 25
SEED = 14
BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("/v1/chat/completions", "post"): ChatCompletionRequest,
    ("/v1/groundproxy/documents", "post"): IngestBody,
    ("/v1/groundproxy/documents", "delete"): DeleteBody,
}


def _schema_dict() -> dict[str, Any]:
    raw = build_app(Settings()).openapi()
    for (path, method), model in BODIES.items():
        op = raw["paths"].get(path, {}).get(method)
        if op is None or "requestBody" in op:
            continue
        body = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in body.pop("$defs", {}).items():
            raw.setdefault("components", {}).setdefault("schemas", {})[name] = sub
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    # the provenance route reads its passage parameters by hand: fuzz them as free strings
    doc = raw["paths"]["/v1/groundproxy/documents/{doc_id}"]["get"]
    doc.setdefault("parameters", []).extend(
        {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
        for name in ("start", "end", "chunk")
    )
    # /metrics is left out of the public schema; fuzz it too (admin keys see their tenant)
    raw["paths"].setdefault("/metrics", {"get": {"responses": {"200": {"description": "ok"}}}})
    return raw


schema = schemathesis.openapi.from_dict(_schema_dict())
schema.app = build_app(Settings())  # in-process transport; each call uses the client below


@pytest.fixture(scope="module")
def asgi_client(
    iso_dirs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    policies, data = iso_dirs
    scratch = tmp_path_factory.mktemp("schemathesis-data") / "data"
    shutil.copytree(data, scratch)  # the fuzzer's documents must not reach other tests' indexes
    app = build_app(
        Settings(policies=policies, data=scratch, watch_policies=False, max_body_bytes=65_536)
    )
    with asgi.get_client(app) as client:  # type: ignore[arg-type]  # runs the lifespan once, in the client's loop
        yield client


def _tokens(path: str, tenant: str) -> list[str | None]:
    admin = path.startswith("/v1/groundproxy/") or path == "/metrics"
    right = admin_key(tenant) if admin else key(tenant)
    wrong_kind = key(tenant) if admin else admin_key(tenant)
    return [right, wrong_kind, key("iso-a"), "sk-not-a-key", None]


@schema.parametrize()
@seed(SEED)
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_input_gets_a_5xx(case: Any, asgi_client: Any, iso_dirs: tuple[Path, Path]) -> None:
    tenant = "iso-b"
    server_paths = [str(p) for p in (*iso_dirs, REPO_ROOT, Path.home())]
    for token in _tokens(case.path, tenant):
        headers = {"authorization": f"Bearer {token}"} if token else {}
        response = case.call(session=asgi_client, headers=headers)
        where = (case.method, case.path, token, response.status_code, response.text[:500])
        assert response.status_code < 500, where
        assert response.headers.get("x-request-id"), where
        assert UPSTREAM_KEY not in response.text, where
        assert not any(p in response.text for p in server_paths), where
        if response.status_code >= 400 and response.content:  # OpenAI's error shape
            err = response.json().get("error")
            assert isinstance(err, dict) and set(err) == {"message", "type", "param", "code"}
