"""Multi-step traces (VeriTrail): every guarded generation stored as a node of a DAG.

This module is the request side (headers, parent checks, recording off the event loop);
the SQLite storage, one file per tenant beside its index generations, is
:mod:`proxy.storage.sqlite_traces` (what a node holds, and its caps).

Bounds (policy ``traces``): nodes older than ``retention_hours`` are invisible at once and
deleted at the next prune; past ``max_nodes`` the oldest are deleted. Pruning runs on the
first write and then every ``PRUNE_EVERY`` writes. Per node: the answer is capped at
``MAX_ANSWER_CHARS`` and the claims at ``MAX_CLAIMS``.

Request headers: ``x-groundproxy-trace-id`` (1-128 of ``A-Za-z0-9._:-``) and
``x-groundproxy-parent-ids`` (comma-separated step ids returned earlier as
``x-groundproxy-step-id``; each must be a stored step of the same tenant). A step without
a trace id joins its first parent's trace, else starts a trace named by its own step id.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from groundproxy.errors import BadRequestError
from groundproxy.guards.types import GuardReport
from groundproxy.policies.schema import TracesPolicy
from groundproxy.proxy.storage.sqlite_traces import TraceStep, TraceStores

log = structlog.get_logger(__name__)

TRACE_HEADER = "x-groundproxy-trace-id"
PARENTS_HEADER = "x-groundproxy-parent-ids"
TRACE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
STEP_ID_RE = re.compile(r"^st_[0-9a-f]{16}$")
MAX_PARENTS = 64


@dataclass
class TraceRequest:
    """What a chat request says about its place in a trace, and where to record it."""

    stores: TraceStores
    tenant: str
    settings: TracesPolicy
    trace_id: str | None = None
    parents: list[str] = field(default_factory=list)
    model: str = ""  # the client's model name, shown by the inspector

    def check_parents(self) -> None:
        """400 when a parent is not a stored step of this tenant (or is past retention)."""
        if not self.parents:
            return
        not_before = time.time() - self.settings.retention_hours * 3600.0
        missing = self.stores.get(self.tenant).missing(self.parents, not_before)
        if missing:
            raise BadRequestError(
                f"unknown parent step id(s) {', '.join(missing[:5])}: each must be an "
                "x-groundproxy-step-id returned to this tenant (and still within retention)",
                param=PARENTS_HEADER,
            )


@dataclass
class StepNode:
    """One guarded generation, as its trace node records it."""

    step_id: str
    request_id: str
    policy_id: str
    question: str | None
    context: Sequence[tuple[str, str]]
    report: GuardReport


def parse_trace_headers(
    trace_header: str | None, parents_header: str | None
) -> tuple[str | None, list[str]]:
    """Validate the two request headers; malformed values → 400 naming the header."""
    trace_id = (trace_header or "").strip() or None
    if trace_id is not None and not TRACE_ID_RE.match(trace_id):
        raise BadRequestError(
            f"{TRACE_HEADER} must be 1-128 characters of letters, digits, '.', '_', ':' or "
            "'-', starting with a letter or digit",
            param=TRACE_HEADER,
        )
    parents = [p.strip() for p in (parents_header or "").split(",") if p.strip()]
    bad = [p for p in parents if not STEP_ID_RE.match(p)]
    if bad:
        raise BadRequestError(
            f"{PARENTS_HEADER}: {bad[0][:40]!r} is not a step id (st_ + 16 hex digits, as "
            "returned in x-groundproxy-step-id)",
            param=PARENTS_HEADER,
        )
    if len(parents) > MAX_PARENTS:
        raise BadRequestError(
            f"{PARENTS_HEADER}: at most {MAX_PARENTS} parents", param=PARENTS_HEADER
        )
    return trace_id, list(dict.fromkeys(parents))


async def record_step(trace: TraceRequest, node: StepNode) -> str | None:
    """Store the node off the event loop; returns the trace id, or None when it failed (a
    trace store error never fails the completion — it is logged)."""
    import functools

    import anyio

    step = TraceStep(node.step_id, node.request_id, node.policy_id, node.question,
                     list(node.context), trace.trace_id, trace.parents, trace.model)  # fmt: skip
    call = functools.partial(
        trace.stores.get(trace.tenant).record, step, node.report, trace.settings
    )
    try:
        return await anyio.to_thread.run_sync(call)
    except (sqlite3.Error, OSError) as exc:
        log.error("trace_record_failed", error_type=type(exc).__name__, error=str(exc)[:200])
        return None


async def trace_for(
    headers: Mapping[str, str],
    stores: TraceStores | None,
    tenant: str,
    settings: TracesPolicy,
    model: str = "",
) -> TraceRequest | None:
    """The request's :class:`TraceRequest` (None when the tenant's traces are disabled);
    malformed headers or unknown parents → 400, checked before the upstream is called."""
    trace_id, parents = parse_trace_headers(headers.get(TRACE_HEADER), headers.get(PARENTS_HEADER))
    if stores is None or not settings.enabled:
        return None
    import anyio

    trace = TraceRequest(stores, tenant, settings, trace_id, parents, model)
    if parents:
        await anyio.to_thread.run_sync(trace.check_parents)
    return trace
