"""``rules.missing_support`` through the real server: a ``groundproxy serve`` process with the
default ladder's real int8 ONNX models (``embedhead`` fast, ``crossencoder`` strong) and the
request's own context as evidence, over ``/v1/groundproxy/check``.

A claim that names something no passage states ("says Acme Corporation") is supported when
the verifier's support reaches the missing bar (the default, 0.5 of the way from the
threshold to certainty); a tenant with ``missing_support: 1`` keeps the old veto. A claim
the verifier does not support ("purchased in Germany") stays unverifiable for both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from groundproxy.guards.verdict.decide import MISSING_CAP
from groundproxy.testing.processes import free_port, start_proxy, stop_process
from tests.conftest import KEYS, _policy
from tests.e2e.check_endpoint import only_claim

pytestmark = pytest.mark.slow

CONTEXT = "The Acme X2 vacuum has a battery that runs for 90 minutes on a single charge."
QUESTION = "How long does the battery last?"
# the strong rung: P(supported) 0.98, above the crossencoder's missing bar 0.55 (τ 0.1)
NAMED = "The Acme X2 battery runs for 90 minutes per charge, says Acme Corporation."
WARRANTY = "The warranty of the Acme robot lasts 12 months from the date of purchase."
# the strong rung: P(supported) 0.35, above τ but under the bar: Germany stays unverified
INVENTED = "The Acme robot's warranty lasts 12 months from the date of purchase in Germany."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, upstream_port: int) -> Iterator[str]:
    root = tmp_path_factory.mktemp("missing-support-serve")
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    data.mkdir()
    for tenant, rules in (("acme", {}), ("strict", {"rules": {"missing_support": 1.0}})):
        spec = _policy(tenant, upstream_port, **rules)
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    port = free_port()
    proc = start_proxy(port, policies, data, log_path=root / "proxy.log", timeout_s=600)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def _claim(c: httpx.Client, tenant: str, answer: str, context: str) -> dict[str, Any]:
    body = {"answer": answer, "question": QUESTION, "context": [context]}
    return only_claim(c, KEYS[tenant], body)


def test_support_above_the_missing_bar_outweighs_an_unstated_name(server: str) -> None:
    with httpx.Client(base_url=server, timeout=120) as c:
        default = _claim(c, "acme", NAMED, CONTEXT)
        strict = _claim(c, "strict", NAMED, CONTEXT)
    # the same strong rung decides both; the policy's bar alone differs
    assert default["rung"] == strict["rung"] == "strong"
    assert default["verdict"] == "supported" and default["probs"]["supported"] > 0.9
    assert "above the missing bar" in default["explanation"]
    assert "Acme Corporation" in default["explanation"]
    assert strict["verdict"] == "unverifiable"
    assert strict["probs"]["supported"] == MISSING_CAP  # the veto's cap, as before
    assert "claim names Acme Corporation; no evidence mentions it" in strict["explanation"]


def test_a_name_the_verifier_does_not_support_stays_unverified(server: str) -> None:
    with httpx.Client(base_url=server, timeout=120) as c:
        for tenant in ("acme", "strict"):
            claim = _claim(c, tenant, INVENTED, WARRANTY)
            assert claim["verdict"] == "unverifiable", (tenant, claim)
            assert "claim names Germany; no evidence mentions it" in claim["explanation"]
