"""The body object and the headers match DESIGN.md's contracts exactly."""

from __future__ import annotations

from groundproxy.guards.answer.report import report_body, report_headers
from groundproxy.guards.types import Claim, ClaimResult, Evidence, GuardReport, Probs

HANDBOOK = Evidence(
    "The warranty lasts 12 months.",
    "handbook.md",
    "c12",
    0.7712,
    (1040, 1069),
    content_hash="ab12cd",
    index_version=7,
)
FAQ = Evidence("Returns within 30 days.", "faq.md", "c3", 0.61, (10, 33))
REQUEST = Evidence("Room 4.", "request:user#1", "s0", 0.5, (0, 7), source="request")


def report() -> GuardReport:
    c1 = ClaimResult(
        Claim("The warranty lasts 24 months.", (0, 29)),
        "contradicted",
        Probs(0.03, 0.91, 0.06),
        0.2109,
        citations=[HANDBOOK],
        action="corrected",
        correction="The warranty lasts 12 months.",
        explanation="evidence states 12 months, claim states 24 months",
    )
    c2 = ClaimResult(
        Claim("Returns take 30 days.", (30, 51)),
        "supported",
        Probs(0.9, 0.02, 0.08),
        0.3,
        citations=[FAQ, HANDBOOK],
        explanation="supported by faq.md#c3 (p=0.90)",
    )
    c3 = ClaimResult(
        Claim("It is in room 4.", (52, 68)),
        "supported",
        Probs(0.8, 0.05, 0.15),
        0.4,
        citations=[REQUEST],
    )
    c4 = ClaimResult(
        Claim("The moon is cheese.", (69, 88)), "unverifiable", Probs(0.1, 0.1, 0.8), 0.6
    )
    return GuardReport(
        original="x",
        text="y",
        claims=[c1, c2, c3, c4],
        trust=0.81666,
        action="rewrite",
        latency_ms=37.6,
        verifier="lexical",
    )


def test_body_matches_the_contract() -> None:
    body = report_body(report(), "acme@3f2a9c1")
    assert list(body) == [
        "trust",
        "action",
        "policy",
        "claims",
        "latency_ms",
        "verifier",
        "unverified",
    ]
    assert body["trust"] == 0.817 and body["action"] == "rewrite"
    assert body["policy"] == "acme@3f2a9c1" and body["unverified"] is False
    assert body["verifier"] == "lexical" and body["latency_ms"] == 37.6
    first = body["claims"][0]
    assert list(first) == [
        "text",
        "span",
        "verdict",
        "probs",
        "uncertainty",
        "citations",
        "action",
        "correction",
        "explanation",
    ]
    assert first == {
        "text": "The warranty lasts 24 months.",
        "span": [0, 29],
        "verdict": "contradicted",
        "probs": {"supported": 0.03, "contradicted": 0.91, "unverifiable": 0.06},
        "uncertainty": 0.211,
        "citations": [
            {
                "doc": "handbook.md",
                "chunk": "c12",
                "score": 0.771,
                "quote": "The warranty lasts 12 months.",
                "span": [1040, 1069],
                "content_hash": "ab12cd",
                "index_version": 7,
            }
        ],
        "action": "corrected",
        "correction": "The warranty lasts 12 months.",
        "explanation": "evidence states 12 months, claim states 24 months",
    }
    assert "correction" not in body["claims"][1]  # only when set
    assert body["claims"][3]["citations"] == []
    # Request-context citations carry no index provenance.
    request_cite = body["claims"][2]["citations"][0]
    assert request_cite["content_hash"] is None and request_cite["index_version"] is None


def test_headers_match_the_contract() -> None:
    headers = report_headers(report(), "acme@3f2a9c1", "st_7f3a", "req-1")
    assert headers == {
        "x-groundproxy-trust": "0.82",
        "x-groundproxy-action": "rewrite",
        "x-groundproxy-claims": "total=4; supported=2; contradicted=1; unverifiable=1",
        "x-groundproxy-citations": "doc:handbook.md#c12; doc:faq.md#c3; request:user#1#s0",
        "x-groundproxy-policy": "acme@3f2a9c1",
        "x-groundproxy-latency-ms": "38",
        "x-groundproxy-step-id": "st_7f3a",
        "x-request-id": "req-1",
    }


def test_headers_are_header_safe() -> None:
    r = report()
    r.claims[0].citations = [
        Evidence("q", "evil\r\nset-cookie: x;.md", "c1", 0.5, (0, 1)),
        Evidence("q", "résumé☃.md", "c2", 0.5, (0, 1)),
    ]
    headers = report_headers(r, "acme@1\n", "st\r1", "id")
    for value in headers.values():
        assert "\r" not in value and "\n" not in value
        value.encode("latin-1")
    # ids are percent-encoded (issue 14: non-Latin-1 ids were mangled), never cut or merged
    assert headers["x-groundproxy-citations"].startswith(
        "doc:evil%0D%0Aset-cookie:%20x%3B.md#c1; doc:r%C3%A9sum%C3%A9%E2%98%83.md#c2"
    )
    assert headers["x-groundproxy-policy"] == "acme@1" and headers["x-groundproxy-step-id"] == "st1"


def test_unverified_flag_and_empty_report() -> None:
    empty = GuardReport("", "", [], trust=1.0, action="none", unverified=True)
    body = report_body(empty, "p")
    # nothing was checked: no trust either way (issue 41, item 4)
    assert body["claims"] == [] and body["unverified"] is True and body["trust"] is None
    headers = report_headers(empty, "p", "s", "r")
    assert headers["x-groundproxy-trust"] == "n/a"
    assert headers["x-groundproxy-claims"] == (
        "total=0; supported=0; contradicted=0; unverifiable=0"
    )
    assert headers["x-groundproxy-citations"] == ""


def test_citations_header_is_capped_with_a_count() -> None:
    from groundproxy.guards.answer.report import MAX_CITATIONS_HEADER

    r = report()
    r.claims[0].citations = [
        Evidence("q", f"{'x' * 240}-{i:03d}.md", "c0", 0.5, (0, 1)) for i in range(149)
    ]
    value = report_headers(r, "p", "s", "r")["x-groundproxy-citations"]
    assert len(value) <= MAX_CITATIONS_HEADER
    items = value.split("; ")
    assert items[-1].startswith("more=")
    assert len(items) - 1 + int(items[-1].removeprefix("more=")) >= 149
