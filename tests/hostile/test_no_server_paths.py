"""No absolute server path reaches a client (issue 32, item 4): every body, stream event and
header that the requests below produce — every route, every stream mode, the three tenants
whose guard fails on a file under the server's folders (a missing calibration, a verifier
looked up in ``<data>/_models``, an unreadable ``adapter.json``), their traces, the
inspector's JSON and the error pages — is grepped for the server's folders."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from groundproxy.testing.processes import REPO_ROOT
from tests.hostile.conftest import Hostile, admin_key, auth, key

pytestmark = pytest.mark.slow

FAILING = ("cal", "bm", "ad")
QUESTION = [{"role": "user", "content": "How long is the warranty?"}]


def _requests(c: httpx.Client, tenant: str) -> list[httpx.Response]:
    """Every kind of request a client or a reviewer of ``tenant`` can make."""
    user, admin = auth(key(tenant)), auth(admin_key(tenant))
    chat = {"model": "gpt-4o-mini", "messages": QUESTION}
    out = [
        c.post("/v1/chat/completions", headers=user, json=chat),
        c.post("/v1/chat/completions", headers=user, json={**chat, "stream": True}),
        c.post(
            "/v1/chat/completions",
            headers={**user, "x-groundproxy-stream": "buffer"},
            json={**chat, "stream": True, "stream_options": {"include_usage": True}},
        ),
        c.post("/v1/chat/completions", headers=user, json={**chat, "n": 2}),
        c.post("/v1/responses", headers=user, json={"model": "m", "input": "The warranty?"}),
        c.post(
            "/v1/responses",
            headers=user,
            json={"model": "m", "input": "The warranty?", "stream": True},
        ),
        c.post("/v1/completions", headers=user, json={"model": "m", "prompt": "Warranty?"}),
        c.post(
            "/v1/completions",
            headers=user,
            json={"model": "m", "prompt": "Warranty?", "stream": True},
        ),
        c.post("/v1/embeddings", headers=user, json={"model": "e", "input": "warranty"}),
        c.post(
            "/v1/groundproxy/check",
            headers=user,
            json={"answer": "The warranty is 24 months.", "question": "Warranty?"},
        ),
    ]
    steps = [
        r.headers["x-groundproxy-step-id"] for r in out if "x-groundproxy-step-id" in r.headers
    ]
    assert steps, [r.status_code for r in out]
    for step in steps:
        out.append(c.get(f"/v1/groundproxy/ui/answers/{step}", headers=admin))
        out.append(c.get(f"/v1/groundproxy/traces/{step}", headers=user))
        out.append(c.get(f"/v1/groundproxy/ui/traces/{step}", headers=admin))
    out.append(
        c.post(
            "/v1/groundproxy/feedback",
            headers=admin,
            json={"step_id": steps[0], "label": "supported"},
        )
    )
    doc = {"id": "paths/handbook.md", "text": "The warranty is 12 months."}
    out += [
        c.post("/v1/groundproxy/documents", headers=admin, json={"documents": [doc]}),
        c.post("/v1/groundproxy/documents", headers=admin, json={"documents": [{"id": "/etc/x"}]}),
        c.request("DELETE", "/v1/groundproxy/documents", headers=admin, json={"ids": ["paths/x"]}),
        c.get("/v1/groundproxy/ui/answers", headers=admin),
        c.get("/v1/groundproxy/documents", headers=admin),
        c.get("/v1/groundproxy/documents/handbook.md?chunk=c0", headers=user),
        c.get("/v1/groundproxy/ui/documents/handbook.md?chunk=c0", headers=admin),
        c.get("/v1/groundproxy/documents/nowhere.md", headers=user),
        c.get("/readyz", headers=admin),
        c.get("/metrics", headers=admin),
        c.get("/v1/models", headers=user),
    ]
    return out


def _public(c: httpx.Client) -> list[httpx.Response]:
    return [
        c.get(path)
        for path in ("/healthz", "/readyz", "/ui", "/ui/app.js", "/no/such/route", "/docs",
                     "/openapi.json", "/redoc")
    ] + [c.delete("/v1/models")]  # fmt: skip


def test_no_server_path_in_any_response(hostile: Hostile) -> None:
    needles = {str(hostile.root), str(REPO_ROOT), sys.prefix, str(Path.home())}
    needles |= {str(Path(n).resolve()) for n in needles}
    needles.discard("/")
    seen, leaks = 0, []
    with hostile.client() as c:
        responses = _public(c)
        for tenant in ("ta", "ts", "tr", *FAILING):
            responses += _requests(c, tenant)
        unverified = [r for r in responses if r.headers.get("x-groundproxy-action") == "unverified"]
        assert len(unverified) >= 3, "the failing tenants' guards did not fail"
        for r in responses:
            seen += 1
            text = r.text + "\n" + "\n".join(f"{k}: {v}" for k, v in r.headers.items())
            leaks += [f"{r.request.method} {r.request.url.path}: {n}" for n in needles if n in text]
    assert seen > 100
    assert not leaks, leaks
