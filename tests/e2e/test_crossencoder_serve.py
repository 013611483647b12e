"""The shipped cross-encoder through the real server: a ``groundproxy serve`` process, the
real int8 ONNX file from models/crossencoder/ (sha256 checked at load), the request's own
context as evidence. A policy naming ``crossencoder`` gets it; the default stays ``embedhead``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import KEYS, _policy
from tests.e2e.adapter_serving import serving

pytestmark = pytest.mark.slow

CONTEXT = "The warranty of the Acme robot lasts 12 months from the date of purchase."
QUESTION = "How long is the warranty?"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, upstream_port: int) -> Iterator[Any]:
    specs = {t: _policy(t, upstream_port) for t in ("acme", "globex")}
    specs["acme"]["verifier"] = {"model": "crossencoder"}
    with serving(tmp_path_factory.mktemp("crossencoder"), specs) as found:
        yield found[0]


def _check(c: httpx.Client, tenant: str, answer: str) -> dict[str, Any]:
    body = {"answer": answer, "question": QUESTION, "context": [CONTEXT]}
    resp = c.post(
        "/v1/groundproxy/check", json=body, headers={"Authorization": f"Bearer {KEYS[tenant]}"}
    )
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    return out


def test_a_policy_naming_the_cross_encoder_is_served_by_it(server: str) -> None:
    with httpx.Client(base_url=server, timeout=120) as c:
        right = _check(c, "acme", "The warranty lasts 12 months from the date of purchase.")
        wrong = _check(c, "acme", "The warranty lasts 48 months from the date of purchase.")
        other = _check(c, "acme", "The robot was designed by a team in Paris.")
        default = _check(c, "globex", "The warranty lasts 12 months from the date of purchase.")
    assert right["groundproxy"]["verifier"] == "crossencoder"
    assert default["groundproxy"]["verifier"] == "embedhead"
    (claim,) = right["groundproxy"]["claims"]
    assert claim["verdict"] == "supported" and claim["probs"]["supported"] > 0.9
    assert right["action"] == "none"
    # the wrong value: the model reads it unsupported, the value rule corrects it
    (claim,) = wrong["groundproxy"]["claims"]
    assert claim["verdict"] == "contradicted" and claim["probs"]["supported"] < 0.1
    assert wrong["action"] == "rewrite" and "12 months" in wrong["answer"]
    # a claim the evidence does not cover: the bar (0.999) keeps the model from calling it
    # contradicted (its P(contradicted) is ~0.97), so it is unverifiable, never rewritten
    (claim,) = other["groundproxy"]["claims"]
    assert claim["verdict"] == "unverifiable" and claim["probs"]["contradicted"] > 0.5
    assert 0.0 <= claim["uncertainty"] <= 1.0
