"""Issue 14, items 1 and 10, through the real ``serve`` process: a key in two policy files
(at reload and after a real restart) and ``retrieval.index`` reaching another tenant's index."""

from __future__ import annotations

import time

import httpx
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from tests.hardening.conftest import Server, admin_key, auth, key, policy, write_policy

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow


def _wait_status(c: httpx.Client, path: str, token: str, status: int) -> httpx.Response:
    deadline = time.monotonic() + 15
    while True:  # the policy watcher polls every second
        r = c.get(path, headers=auth(token))
        if r.status_code == status or time.monotonic() > deadline:
            return r
        time.sleep(0.3)


def _wait_log(server: Server, needle: str) -> None:
    deadline = time.monotonic() + 15
    while needle not in server.log_text():
        assert time.monotonic() < deadline, f"{needle!r} never logged"
        time.sleep(0.3)


def _served_as(c: httpx.Client, token: str) -> str | None:
    body = c.get("/readyz", headers=auth(token)).json()
    tenant = body.get("tenant")
    return str(tenant) if tenant is not None else None


def test_an_index_belongs_to_one_tenant_unless_both_policies_share_it(server: Server) -> None:
    with server.client() as c:
        write_policy(server.policies, "tc", server.upstream_port, retrieval={"index": "tb"})
        _wait_log(server, "retrieval.index 'tb'")
        r = c.get("/v1/models", headers=auth(key("tc")))
        assert r.status_code == 401, "a policy naming another tenant's index was served"
        assert c.get("/v1/groundproxy/documents", headers=auth(admin_key("tc"))).status_code == 401
        # tb agrees, tc agrees: now shared
        write_policy(server.policies, "tb", server.upstream_port, retrieval={"shared_with": ["tc"]})
        write_policy(
            server.policies,
            "tc",
            server.upstream_port,
            retrieval={"index": "tb", "shared_with": ["tb"]},
        )
        r = _wait_status(c, "/v1/groundproxy/documents", admin_key("tc"), 200)
        assert r.status_code == 200, r.text
        assert any(d["doc_id"] == "handbook.md" for d in r.json()["data"])
        # the owner withdraws: tc is refused again, tb keeps being served
        write_policy(server.policies, "tb", server.upstream_port)
        assert _wait_status(c, "/v1/models", key("tc"), 401).status_code == 401
        assert c.get("/v1/models", headers=auth(key("tb"))).status_code == 200
        (server.policies / "tc.yaml").unlink()


def test_a_key_in_two_files_is_refused_at_reload_and_after_a_restart(server: Server) -> None:
    thief = policy("aa", server.upstream_port)
    thief.update(keys=[hash_key(key("ta"))], admin_keys=[hash_key(admin_key("ta"))])
    aa = server.policies / "aa.yaml"  # sorts before ta.yaml
    with server.client() as c:
        assert _served_as(c, admin_key("ta")) == "ta"
        aa.write_text(yaml.safe_dump(thief), encoding="utf-8")
        _wait_log(server, "aa.yaml")
        assert _served_as(c, admin_key("ta")) == "ta"  # reload: the new file is refused
    server.restart()
    with server.client() as c:
        # start-up: neither file wins by its name; both are refused, deterministically
        assert c.get("/v1/models", headers=auth(key("ta"))).status_code == 401
        assert _served_as(c, admin_key("ta")) is None
        assert c.get("/v1/models", headers=auth(key("tb"))).status_code == 200
        logged = server.log_text().split("\n")
        refusals = [line for line in logged if "both files are refused" in line]
        assert any("aa.yaml" in line and "'ta'" in line for line in refusals), refusals
        assert any("ta.yaml" in line and "'aa'" in line for line in refusals), refusals
        aa.unlink()  # the clash resolved: ta is back without another restart
        r = _wait_status(c, "/v1/models", key("ta"), 200)
        assert r.status_code == 200
        assert _served_as(c, admin_key("ta")) == "ta"
