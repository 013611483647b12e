"""A verifier's calibration through the real server (issue 42 item 3): a ``groundproxy serve``
process, the real int8 ONNX cross-encoder (the shipped files, sha256 checked at load) as a
model of the models folder (``<data>/_models/cecal``) that has a ``calibration.json`` beside
it. A claim's served ``uncertainty`` is then the calibrated P(the verdict is wrong); the same
model without the file (the shipped ``crossencoder``) serves the decision margin."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from groundproxy.guards.verdict.uncertainty import margin_risk
from groundproxy.testing.processes import free_port, start_proxy, stop_process
from tests.conftest import KEYS, _policy
from tests.e2e.check_endpoint import only_claim

pytestmark = pytest.mark.slow

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "crossencoder"
CALIBRATION = {"object": "groundproxy.calibration", "method": "platt", "a": 0.3, "b": -0.5}
CONTEXT = "The warranty of the Acme robot lasts 12 months from the date of purchase."
QUESTION = "How long is the warranty?"
RIGHT = "The warranty lasts 12 months from the date of purchase."
THRESHOLD = 0.1  # the cross-encoder's own (build.json)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, upstream_port: int) -> Iterator[str]:
    root = tmp_path_factory.mktemp("calibration-serve")
    policies, data = root / "policies", root / "data"
    model = data / "_models" / "cecal"  # a built model: the shipped files, and a calibration
    model.mkdir(parents=True)
    for name in ("build.json", "model.int8.onnx", "tokenizer.json"):
        (model / name).symlink_to(SHIPPED / name)
    (model / "calibration.json").write_text(json.dumps(CALIBRATION), encoding="utf-8")
    policies.mkdir()
    for tenant, verifier in (("acme", "cecal"), ("globex", "crossencoder")):
        spec = _policy(tenant, upstream_port)
        spec["verifier"] = {"model": verifier, "ladder": {"strong": "none"}}
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    port = free_port()
    proc = start_proxy(port, policies, data, log_path=root / "proxy.log", timeout_s=600)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def _claim(c: httpx.Client, tenant: str) -> dict[str, Any]:
    body = {"answer": RIGHT, "question": QUESTION, "context": [CONTEXT]}
    return only_claim(c, KEYS[tenant], body)


def test_a_claims_served_uncertainty_is_the_calibrated_p_wrong(server: str) -> None:
    with httpx.Client(base_url=server, timeout=120) as c:
        calibrated = _claim(c, "acme")
        plain = _claim(c, "globex")
    # the same model, the same verdict and probabilities
    assert calibrated["verdict"] == plain["verdict"] == "supported"
    p = calibrated["probs"]["supported"]
    assert p == plain["probs"]["supported"] and p > 0.9
    # P(wrong) of a supported verdict: 1 − σ(a · logit(p) + b)
    expected = 1.0 - 1.0 / (1.0 + math.exp(-(0.3 * math.log(p / (1.0 - p)) - 0.5)))
    assert calibrated["uncertainty"] == pytest.approx(expected, abs=2e-3)
    # without the file: the decision margin, far from it
    assert plain["uncertainty"] == pytest.approx(margin_risk(p, True, THRESHOLD), abs=2e-3)
    assert abs(calibrated["uncertainty"] - plain["uncertainty"]) > 0.1
