"""One real fake upstream + one real ``groundproxy serve`` with the three tenants the SDK
end-to-end tests share (openai Python tools, LangChain, the Node SDK): ``acme`` (buffered
guard), ``sentence`` (sentence-streamed guard) and ``loose`` (guard off), all on the shared
``acme`` index."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process
from tests.conftest import _policy, share_index


@contextmanager
def three_tenant_server(
    work: Path, data_dir: Path, rules: list[dict[str, Any]], **extra: Any
) -> Iterator[str]:
    """Start both processes (upstream scripted with ``rules``; ``extra`` is added to every
    tenant's policy, e.g. its upstream model map) and yield the proxy's ``/v1`` base URL."""
    script = work / "script.json"
    script.write_text(json.dumps({"rules": rules}), encoding="utf-8")
    up_port, port = free_port(), free_port()
    upstream = start_fake_upstream(up_port, script)
    policies = work / "policies"
    policies.mkdir()

    def spec(tenant: str, **kw: Any) -> dict[str, Any]:
        # fresh dicts per tenant: share_index edits each tenant's own ``retrieval``
        return _policy(tenant, up_port, retrieval={"index": "acme"}, **kw,
                       **json.loads(json.dumps(extra)))  # fmt: skip

    specs = {
        "acme": spec("acme"),
        "sentence": spec("sentence", stream="sentence"),
        "loose": spec("loose", guard=False),
    }
    share_index(specs)
    for tenant, body in specs.items():
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(body), encoding="utf-8")
    proc: subprocess.Popen[bytes] | None = None
    try:
        proc = start_proxy(port, policies, data_dir, log_path=work / "proxy.log")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        if proc is not None:
            stop_process(proc)
        stop_process(upstream)
