"""The ``groundproxy`` body object and the ``x-groundproxy-*`` headers (DESIGN.md, Contracts).

Body keys: trust (null for an answer with no claims; header ``n/a``), action, policy,
claims[{text, span, verdict, probs, uncertainty,
citations[{doc, chunk, score, quote, span, content_hash,
index_version}], action, correction (only when set),
explanation, conflict (only when the request and the documents disagreed), judge (only
for a claim escalated to the judge, guards.judge.opinion), rung and rung_verifier (which rung of the
verifier ladder decided it: fast, strong or judge, guards.verdict.ladder; absent for a claim no
verifier scored), rung_skipped (only for an unsure claim the strong rung did not score:
budget, share or error)}], plus latency_ms, verifier and unverified, judge (the judge's
figures, when the policy escalates) and ladder (claims per rung and skipped, also the header
``x-groundproxy-ladder``, when a claim was scored by a verifier); when the request's
context was too large to verify whole within the cap or the budget
(guards.evidence.request_evidence), ``context`` {passages, verified, capped} and a ``notes`` line,
and the header ``x-groundproxy-context``; ``notes`` also says why a JSON answer's correction was not
made (guards.action, row 12). Header names are lower-case and their values are header-safe (no
CR/LF or other control characters, latin-1 only).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from groundproxy.guards.types import VERDICTS, ClaimResult, Evidence, GuardReport
from groundproxy.guards.verdict.ladder import ladder_counts

_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")


def header_safe(value: str) -> str:
    """Drop control characters (CR, LF …) and anything outside latin-1."""
    return _UNSAFE.sub("", value).encode("latin-1", "ignore").decode("latin-1").strip()


def _citation(e: Evidence) -> dict[str, Any]:
    return {
        "doc": e.doc,
        "chunk": e.chunk,
        "score": round(e.score, 3),
        "quote": e.text,
        "span": [e.span[0], e.span[1]],
        # Provenance (VeriTrail): null for the request's own context messages.
        "content_hash": e.content_hash or None,
        "index_version": e.index_version if e.source == "index" else None,
    }


def _claim(r: ClaimResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "text": r.claim.text,
        "span": [r.claim.span[0], r.claim.span[1]],
        "verdict": r.verdict,
        "probs": r.probs.as_dict(),
        "uncertainty": round(r.uncertainty, 3),
        "citations": [_citation(e) for e in r.citations],
        "action": r.action,
    }
    if r.correction is not None:
        out["correction"] = r.correction
    out["explanation"] = r.explanation
    if r.conflict is not None:
        out["conflict"] = r.conflict
    if r.judge is not None:
        out["judge"] = r.judge
    if r.rung is not None:
        out["rung"] = r.rung
        out["rung_verifier"] = r.rung_verifier
    if r.rung_skipped is not None:
        out["rung_skipped"] = r.rung_skipped
    return out


def report_body(report: GuardReport, policy_id: str) -> dict[str, Any]:
    """The ``groundproxy`` object added to the chat completion body."""
    trust = report.reported_trust
    body: dict[str, Any] = {
        "trust": None if trust is None else round(trust, 3),
        "action": report.action,
        "policy": policy_id,
        "claims": [_claim(r) for r in report.claims],
        "latency_ms": round(report.latency_ms, 1),
        "verifier": report.verifier,
        "unverified": report.unverified,
    }
    if report.adapter is not None:
        body["adapter"] = report.adapter
    if report.context is not None and report.context.capped:
        c = report.context
        body["context"] = {"passages": c.passages, "verified": c.verified, "capped": True}
        body["notes"] = [context_note(report)]
    if report.judge is not None:
        body["judge"] = report.judge
    if (ladder := ladder_counts(report.claims)) is not None:
        body["ladder"] = ladder
    if report.notes:
        body.setdefault("notes", []).extend(report.notes)
    return body


def ladder_header(counts: dict[str, int]) -> str:
    """``fast=N; strong=M; judge=J; skipped=K`` and, when K > 0, the skips by reason
    (``skipped_budget=…``; header ``x-groundproxy-ladder``)."""
    return "; ".join(f"{k}={v}" for k, v in counts.items())


def judge_header(figures: dict[str, Any]) -> str:
    """``escalated=N; overturned=M; skipped=K; ms=T`` (header ``x-groundproxy-judge``)."""
    return (
        f"escalated={figures.get('escalated', 0)}; overturned={figures.get('overturned', 0)}; "
        f"skipped={figures.get('skipped', 0)}; ms={round(float(figures.get('ms', 0.0)))}"
    )


def context_note(report: GuardReport) -> str:
    """The note of an answer verified on part of the request's context."""
    c = report.context
    if c is None:
        return ""
    return (
        f"verified on the top {c.verified} of {c.passages} request-context passages "
        "(context cap or latency budget)"
    )


def claim_counts(report: GuardReport) -> str:
    """``total=5; supported=3; contradicted=1; unverifiable=1``."""
    counts = {v: 0 for v in VERDICTS}
    for r in report.claims:
        counts[r.verdict] += 1
    parts = [f"total={len(report.claims)}"] + [f"{v}={counts[v]}" for v in VERDICTS]
    return "; ".join(parts)


# Header values stay well under the 16 kB Node's HTTP parser accepts for all headers.
MAX_CITATIONS_HEADER = 4096
_ID_SAFE = "/:#@+~._-"  # kept as they are; everything else (incl. ';', '%', non-ASCII) %XX


def citation_list(report: GuardReport) -> str:
    """Distinct cited chunks in order of first citation, ``; ``-separated.

    Each id is percent-encoded (UTF-8, RFC 3986: ``日本.md`` → ``%E6%97%A5%E6%9C%AC.md``;
    ``;``, ``%``, spaces and control characters too), so any id survives and splits
    unambiguously. The value is capped at :data:`MAX_CITATIONS_HEADER` bytes: ids that do
    not fit are counted in a last ``more=N`` item (the body lists every citation).
    """
    seen: list[str] = []
    for r in report.claims:
        for e in r.citations:
            ident = quote(e.citation_id, safe=_ID_SAFE)
            if ident and ident not in seen:
                seen.append(ident)
    kept: list[str] = []
    size = 0
    for i, ident in enumerate(seen):
        tail = len(f"; more={len(seen) - i}") if i + 1 < len(seen) else 0
        if size + len(ident) + 2 + tail > MAX_CITATIONS_HEADER:
            kept.append(f"more={len(seen) - i}")
            break
        kept.append(ident)
        size += len(ident) + 2
    return "; ".join(kept)


NO_CLAIMS = "n/a"  # x-groundproxy-trust of an answer without claims


def trust_header(report: GuardReport) -> str:
    """``x-groundproxy-trust``: T with two decimals, or ``n/a`` for an answer with no claims."""
    trust = report.reported_trust
    return NO_CLAIMS if trust is None else f"{trust:.2f}"


def report_headers(
    report: GuardReport, policy_id: str, step_id: str, request_id: str
) -> dict[str, str]:
    """The ``x-groundproxy-*`` response headers and ``x-request-id``."""
    headers = {
        "x-groundproxy-trust": trust_header(report),
        "x-groundproxy-action": report.action,
        "x-groundproxy-claims": claim_counts(report),
        "x-groundproxy-citations": citation_list(report),
        "x-groundproxy-policy": policy_id,
        "x-groundproxy-latency-ms": str(round(report.latency_ms)),
        "x-groundproxy-step-id": step_id,
        "x-request-id": request_id,
    }
    if report.context is not None and report.context.capped:
        headers["x-groundproxy-context"] = (
            f"top-n={report.context.verified}; passages={report.context.passages}"
        )
    if report.judge is not None:
        headers["x-groundproxy-judge"] = judge_header(report.judge)
    if (ladder := ladder_counts(report.claims)) is not None:
        headers["x-groundproxy-ladder"] = ladder_header(ladder)
    return {k: header_safe(v) for k, v in headers.items()}
