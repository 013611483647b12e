"""proxy.serving.headers: the x-groundproxy-* headers of buffer, sentence and relay responses."""

from __future__ import annotations

import pytest

from groundproxy.guards.types import Claim, ClaimResult, GuardReport, Probs
from groundproxy.proxy.serving.headers import response_headers


def test_buffer_headers_carry_the_verdict_and_the_trace() -> None:
    probs = Probs(0.82, 0.1, 0.08)
    claim = ClaimResult(Claim("a", (0, 1)), "supported", probs, probs.uncertainty())
    report = GuardReport("a", "a", [claim], trust=0.82, action="rewrite", latency_ms=37.6)
    h = response_headers("buffer", "acme@1", "st_1", "req-1", report=report, trace_id="t.1")
    assert h["x-groundproxy-trust"] == "0.82" and h["x-groundproxy-action"] == "rewrite"
    assert h["x-groundproxy-latency-ms"] == "38" and h["x-groundproxy-trace-id"] == "t.1"
    assert h["x-groundproxy-claims"].startswith("total=1")
    empty = GuardReport("", "", [], trust=1.0, action="none")  # no claims: nothing to trust
    assert response_headers("buffer", "a@1", "st_1", "r", report=empty)["x-groundproxy-trust"] == (
        "n/a"
    )
    assert h["x-request-id"] == "req-1" and h["x-groundproxy-step-id"] == "st_1"
    with pytest.raises(ValueError):
        response_headers("buffer", "acme@1", "st_1", "req-1")


def test_sentence_headers_are_only_what_is_known_up_front() -> None:
    h = response_headers("sentence", "acme@1", "st_1", "req-1")
    assert h == {
        "x-request-id": "req-1",
        "x-groundproxy-policy": "acme@1",
        "x-groundproxy-step-id": "st_1",
        "x-groundproxy-stream": "sentence",
    }


def test_relay_headers_say_unverified() -> None:
    h = response_headers("relay", "acme@1\n", "st_1", "req-1")
    assert h["x-groundproxy-action"] == "unverified" and h["x-groundproxy-trust"] == "n/a"
    assert h["x-groundproxy-latency-ms"] == "0" and h["x-groundproxy-stream"] == "relay"
    assert h["x-groundproxy-policy"] == "acme@1"  # header-safe
