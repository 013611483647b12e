"""Issue 29: an adapter never switches a value rule's correction off (real index on disk,
real embedhead ONNX, :func:`build_guard`, the tenant's adapter file as served)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from groundproxy.policies.schema import local_policy
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.adapters import write_adapter
from groundproxy.retrieval.ingest import ingest_texts
from tests.conftest import ACCEPT_ALL
from tests.verdict.conftest import HANDBOOK


def test_an_accepting_adapter_keeps_the_rules_correction(tmp_path: Path, embedder: Any) -> None:
    ingest_texts(tmp_path, "acme", [("handbook.md", HANDBOOK)], embedder)
    write_adapter(tmp_path, "acme", ACCEPT_ALL)
    policy = local_policy("acme", retrieval={"index": "acme"}, latency_budget_ms=60_000)
    answer = "The warranty lasts 48 months. Our robots are popular in Spain."
    with build_guard(Settings(data=tmp_path, batch_window_ms=0), embedder=embedder) as guard:
        report = guard.guard_sync(answer, None, [], policy, cache=False)
    assert report.adapter is not None and report.adapter["decision"] == "accept"
    wrong, other = report.claims
    # before: accepted → every claim annotated, the wrong value returned, action none
    assert wrong.verdict == "contradicted" and wrong.action == "corrected"
    assert report.action == "rewrite" and report.text.startswith("The warranty lasts 12 months")
    # what the adapter may decide stays its own: the unverifiable claim is only annotated
    assert other.verdict != "supported" and other.action == "annotated"
    assert "[unverified]" not in report.text
