"""The ``x-groundproxy-*`` response headers of every response mode, built in one place.

- ``buffer`` (JSON answers, and streams guarded before the first byte): the whole verdict
  (:func:`guards.answer.report.report_headers`: trust, action, claims, citations, policy, latency,
  step and request ids) and, for a multi-step trace, ``x-groundproxy-trace-id``;
- ``sentence``: only what is known before the answer — request, policy and step ids and
  ``x-groundproxy-stream: sentence`` (the verdict rides in the last SSE event);
- ``relay`` (an unguarded stream): the unverified verdict, known up front (trust ``n/a``:
  not checked; action ``unverified``, latency 0) and ``x-groundproxy-stream: relay``.
"""

from __future__ import annotations

from typing import Literal

from groundproxy.guards import NO_CLAIMS, header_safe, report_headers
from groundproxy.guards.types import GuardReport

Mode = Literal["buffer", "sentence", "relay"]
# what a browser app may read from a cross-origin response (CORS ``expose_headers``)
EXPOSED_HEADERS = (
    "x-request-id", "x-groundproxy-trust", "x-groundproxy-action", "x-groundproxy-claims",
    "x-groundproxy-citations", "x-groundproxy-policy", "x-groundproxy-latency-ms",
    "x-groundproxy-step-id", "x-groundproxy-stream", "x-groundproxy-trace-id", "retry-after",
    "x-groundproxy-worker", "x-groundproxy-context", "x-groundproxy-judge",
    "x-groundproxy-ladder",
)  # fmt: skip
NO_BUFFERING = {"cache-control": "no-cache", "x-accel-buffering": "no"}  # streamed responses


def response_headers(
    mode: Mode,
    policy_id: str,
    step_id: str,
    request_id: str,
    report: GuardReport | None = None,
    trace_id: str | None = None,
) -> dict[str, str]:
    """The headers for ``mode`` (module docstring); ``report`` is required for ``buffer``."""
    if mode == "buffer":
        if report is None:
            raise ValueError("buffer-mode headers need the guard report")
        headers = report_headers(report, policy_id, step_id, request_id)
    elif mode == "sentence":
        headers = {
            "x-request-id": request_id,
            "x-groundproxy-policy": policy_id,
            "x-groundproxy-step-id": step_id,
            "x-groundproxy-stream": "sentence",
        }
    else:
        headers = {
            "x-groundproxy-trust": NO_CLAIMS,  # not checked: n/a, never 0.00 (untrusted)
            "x-groundproxy-action": "unverified",
            "x-groundproxy-policy": policy_id,
            "x-groundproxy-latency-ms": "0",
            "x-groundproxy-step-id": step_id,
            "x-groundproxy-stream": "relay",
            "x-request-id": request_id,
        }
    if trace_id is not None:
        headers["x-groundproxy-trace-id"] = trace_id
    return {k: header_safe(v) for k, v in headers.items()}
