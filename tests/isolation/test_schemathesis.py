"""schemathesis against the OpenAPI schema, in process (ASGI): no input gets a 5xx.

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
from hypothesis import HealthCheck, settings
from schemathesis.python import asgi

from groundproxy.proxy.app import create_app
from groundproxy.proxy.protocol import ChatCompletionRequest
from groundproxy.proxy.routes.admin import DeleteBody, IngestBody
from groundproxy.proxy.settings import Settings
from tests.isolation.conftest import admin_key, key

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
MAX_EXAMPLES = 25
BODIES = {
    ("/v1/chat/completions", "post"): ChatCompletionRequest,
    ("/v1/groundproxy/documents", "post"): IngestBody,
    ("/v1/groundproxy/documents", "delete"): DeleteBody,
}


def _schema_dict() -> dict[str, Any]:
    raw = create_app(Settings()).openapi()
    for (path, method), model in BODIES.items():
        op = raw["paths"].get(path, {}).get(method)
        if op is None or "requestBody" in op:
            continue
        body = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in body.pop("$defs", {}).items():
            raw.setdefault("components", {}).setdefault("schemas", {})[name] = sub
        op["requestBody"] = {"required": True,
                             "content": {"application/json": {"schema": body}}}
    return raw


schema = schemathesis.openapi.from_dict(_schema_dict())
schema.app = create_app(Settings())  # in-process transport; each call uses the client below


@pytest.fixture(scope="module")
def asgi_client(iso_dirs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    Any
]:
    policies, data = iso_dirs
    scratch = tmp_path_factory.mktemp("schemathesis-data") / "data"
    shutil.copytree(data, scratch)  # the fuzzer's documents must not reach other tests' indexes
    app = create_app(Settings(policies=policies, data=scratch, watch_policies=False,
                              max_body_bytes=65_536))
    with asgi.get_client(app) as client:  # runs the lifespan once, in the client's loop
        yield client


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_no_input_gets_a_5xx(case: Any, asgi_client: Any) -> None:
    tenant = "iso-b"
    admin = case.path.startswith("/v1/groundproxy/")
    token = admin_key(tenant) if admin else key(tenant)
    response = case.call(session=asgi_client, headers={"authorization": f"Bearer {token}"})
    assert response.status_code < 500, (case.method, case.path, response.status_code,
                                        response.text[:500])
    if response.status_code >= 400 and response.content:  # every error has OpenAI's shape
        err = response.json().get("error")
        assert isinstance(err, dict) and set(err) == {"message", "type", "param", "code"}
