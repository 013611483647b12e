"""Input safety: names and ids can't escape the data folder, hostile bodies get 413/400,
keys are only ever held hashed, and no prompt, answer or key reaches the logs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from structlog.testing import capture_logs

from groundproxy.errors import BadRequestError
from groundproxy.policies.keys import hash_key
from groundproxy.policies.loader import PolicyStore
from groundproxy.retrieval.tenant_index import IndexManager, TenantIndex
from tests.isolation.conftest import admin_key, key

BAD_DOC_IDS = [
    "../escape.md",
    "a/../../b.md",
    "/etc/passwd",
    "..",
    ".",
    "a//b",
    "a\x00b",
    "a\\..\\b",
    "a/./b",
    " lead",
    "trail ",
    "x" * 300,
    "",
    "a\nb",
    "%2e%2e/x",
]


def admin(tenant: str = "iso-a") -> dict[str, str]:
    return {"authorization": f"Bearer {admin_key(tenant)}"}


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def assert_error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return dict(err)


async def test_admin_api_rejects_unsafe_document_ids(
    iso_client: httpx.AsyncClient, iso_dirs: tuple[Path, Path]
) -> None:
    data = iso_dirs[1]
    outside = tree(data.parent)
    for bad in BAD_DOC_IDS:
        resp = await iso_client.post(
            "/v1/groundproxy/documents",
            headers=admin(),
            json={"documents": [{"id": bad, "text": "Some text."}]},
        )
        assert_error(resp, 400)
        resp = await iso_client.request(
            "DELETE", "/v1/groundproxy/documents", headers=admin(), json={"ids": [bad]}
        )
        assert_error(resp, 400)
    assert tree(data.parent) == outside, "an invalid id wrote something"


def test_tenant_and_index_names_cannot_escape(tmp_path: Path, upstream_port: int) -> None:
    from tests.conftest import _policy

    policies = tmp_path / "policies"
    policies.mkdir()
    tenants: dict[str, dict[str, Any]] = {
        "good": {},
        "dots": {"tenant": "../evil"},
        "index": {"retrieval": {"index": "../../etc"}},
        "slash": {"retrieval": {"index": "a/b"}},
    }
    for name, overrides in tenants.items():
        spec = _policy("acme", upstream_port)
        spec.update(tenant=name, keys=[hash_key(f"sk-{name}")])
        for k, v in overrides.items():
            spec[k] = {**spec.get(k, {}), **v} if isinstance(v, dict) else v
        (policies / f"{name}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    store = PolicyStore(policies)
    errors = store.load()
    assert store.tenants() == ["good"]
    assert len(errors) == 3, errors
    manager = IndexManager(tmp_path / "data")
    for bad in ("..", "../x", "a/b", ".hidden", "", "x\x00", "/abs"):
        with pytest.raises(BadRequestError):
            manager.get(bad)
        with pytest.raises(BadRequestError):
            TenantIndex.open(tmp_path / "data", bad)
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


async def test_admin_api_hostile_bodies(iso_client: httpx.AsyncClient) -> None:
    huge = b'{"documents": [{"id": "a.md", "text": "' + b"x" * 70_000 + b'"}]}'
    assert_error(
        await iso_client.post("/v1/groundproxy/documents", content=huge, headers=admin()), 413
    )

    async def chunks() -> Any:  # no content-length: the limit holds while reading
        for _ in range(100):
            yield b"x" * 1024

    assert_error(
        await iso_client.post("/v1/groundproxy/documents", content=chunks(), headers=admin()), 413
    )
    deep = b'{"documents": ' + b"[" * 100 + b"]" * 100 + b"}"
    assert (
        "nests deeper"
        in assert_error(
            await iso_client.post("/v1/groundproxy/documents", content=deep, headers=admin()), 400
        )["message"]
    )
    bad_utf8 = b'{"documents": [{"id": "a.md", "text": "\xc3\x28"}]}'
    assert (
        "UTF-8"
        in assert_error(
            await iso_client.post("/v1/groundproxy/documents", content=bad_utf8, headers=admin()),
            400,
        )["message"]
    )
    for body in (
        b"[]",
        b'"x"',
        b"null",
        b'{"documents": "x"}',
        b'{"documents": [{}]}',
        b'{"documents": [{"id": 5, "text": "t"}]}',
        b"{",
        b"\xff",
    ):
        resp = await iso_client.post("/v1/groundproxy/documents", content=body, headers=admin())
        assert_error(resp, 400)


async def test_chat_hostile_bodies_beyond_the_basics(iso_client: httpx.AsyncClient) -> None:
    auth = {"authorization": f"Bearer {key('iso-a')}"}

    async def chunks() -> Any:
        for _ in range(100):
            yield b"x" * 1024

    assert_error(await iso_client.post("/v1/chat/completions", content=chunks(), headers=auth), 413)
    for body in (
        b"[]",
        b"null",
        b'{"model": 5, "messages": []}',
        b'{"model": "m", "messages": [{"role": "user", "content": {"a": 1}}]}',
        b'{"model": "m", "messages": "hi"}',
        b'{"model": "m", "messages": [{}]}',
        b'{"model": "m", "messages": [{"role": "user", "content": "\xed\xa0\x80"}]}',
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": [1]}',
    ):
        resp = await iso_client.post("/v1/chat/completions", content=body, headers=auth)
        assert_error(resp, 400)


def _walk_strings(obj: Any, seen: set[int], depth: int = 0) -> Any:
    if id(obj) in seen or depth > 12:
        return
    seen.add(id(obj))
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, bytes):
        yield obj.decode("latin-1")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk_strings(k, seen, depth + 1)
            yield from _walk_strings(v, seen, depth + 1)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            yield from _walk_strings(v, seen, depth + 1)
    elif hasattr(obj, "__dict__") or hasattr(obj, "__slots__"):
        attrs = dict(getattr(obj, "__dict__", {}))
        for slot in getattr(type(obj), "__slots__", ()):
            attrs[slot] = getattr(obj, slot, None)
        for v in attrs.values():
            if not callable(v) or hasattr(v, "__dict__"):
                yield from _walk_strings(v, seen, depth + 1)


def test_keys_only_stored_hashed(
    tmp_path: Path, upstream_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import _policy

    raw = ["sk-raw-env-key-one", "sk-raw-env-key-two"]
    monkeypatch.setenv("ISO_ENV_KEYS", ",".join(raw))
    spec = _policy("acme", upstream_port)
    spec.update(tenant="envkeys", key_env="ISO_ENV_KEYS")
    spec.pop("keys")
    (tmp_path / "envkeys.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    plain = _policy("acme", upstream_port)
    plain.update(tenant="plainkey", keys=["sk-a-raw-key-in-the-file"])
    (tmp_path / "plainkey.yaml").write_text(yaml.safe_dump(plain), encoding="utf-8")
    store = PolicyStore(tmp_path)
    errors = store.load()
    assert store.tenants() == ["envkeys"], errors  # a raw key in a policy file is refused
    assert any("plainkey" in e for e in errors)
    assert not any("sk-a-raw-key-in-the-file" in e for e in errors), "the error echoes a key"
    assert store.lookup_key(raw[0]) is not None and store.lookup_key(raw[1]) is not None
    held = set(_walk_strings(store, set()))
    assert hash_key(raw[0]) in held  # the walk does reach the key table
    for secret in raw:
        assert not any(secret in s for s in held), "a raw key is held in memory"


async def test_no_prompt_answer_or_key_in_logs(
    iso_client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    prompt = "Zebra-prompt-7731 how long is the warranty?"
    secrets = [
        key("iso-a"),
        admin_key("iso-a"),
        "sk-wrong-key-5521",
        "Zebra-prompt-7731",
        "24 months",
        "limited warranty",
        "Secret-doc-text-8812",
    ]
    auth = {"authorization": f"Bearer {key('iso-a')}"}
    caplog.set_level(logging.INFO)
    with capture_logs() as events:
        for stream in (False, True):
            resp = await iso_client.post(
                "/v1/chat/completions",
                headers=auth,
                json={
                    "model": "gpt-4o-mini",
                    "stream": stream,
                    "messages": [{"role": "user", "content": prompt}],
                },
            )
            assert resp.status_code == 200
        resp = await iso_client.post(
            "/v1/chat/completions",
            json={"model": "m"},
            headers={"authorization": "Bearer sk-wrong-key-5521"},
        )
        assert resp.status_code == 401
        resp = await iso_client.post(
            "/v1/chat/completions",
            headers=auth,
            json={"model": "fail-500", "messages": [{"role": "user", "content": prompt}]},
        )
        assert resp.status_code == 502
        resp = await iso_client.post(
            "/v1/groundproxy/documents",
            headers=admin(),
            json={"documents": [{"id": "secret.md", "text": "Secret-doc-text-8812 is here."}]},
        )
        assert resp.status_code == 200
    shown = [e for e in events if e.get("log_level") != "debug"]
    assert shown, "nothing was logged: the check would be empty"
    text = "\n".join(repr(e) for e in shown) + "\n".join(
        r.getMessage() for r in caplog.records if r.levelno >= logging.INFO
    )
    for secret in secrets:
        assert secret not in text, f"{secret!r} reached the logs"
