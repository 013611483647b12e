"""``POST /v1/groundproxy/feedback``: a reviewer labels one answer (admin key of the tenant).

Body: either the answer itself, or the id of a step the proxy guarded (from the trace
store: ``step_id``, the server's ``x-groundproxy-step-id``, or ``request_id`` while it
names one answer only — 409 when several answers carry it; the answer as the upstream
wrote it is looked up there, in the calling tenant's store only)::

    {"answer": "…", "question": "…", "context": ["…"], "label": "hallucinated"}
    {"request_id": "…", "label": "supported"}
    {"step_id": "…", "claims": [{"text": "…", "label": "hallucinated"}]}

``label`` (supported / hallucinated), ``label_hallucinated`` (0 / 1) or labelled
``claims`` give the answer's label (:mod:`groundproxy.proxy.storage.feedback`). The record is
appended to ``<data>/<tenant>/feedback.jsonl`` — or, with ``GROUNDPROXY_DATABASE_URL``, to
``gp_feedback`` (:mod:`groundproxy.proxy.storage.pg_adapt`), shared by the replicas;
``groundproxy calibrate --fit`` learns from it. Reply: ``{"object": "groundproxy.feedback",
"id", "label_hallucinated", "count"}``. Bodies are never logged.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import anyio
import structlog
from fastapi import APIRouter

from groundproxy.errors import BadRequestError, NotFoundError
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.proxy.auth import AdminTenant
from groundproxy.proxy.feedback_request import check_feedback
from groundproxy.proxy.routes.body import JsonBody
from groundproxy.proxy.state import Served
from groundproxy.proxy.storage.feedback import CALLER, label_target, parse_labelled
from groundproxy.proxy.storage.sqlite_traces import LabelRef, TraceStores

router = APIRouter()
log = structlog.get_logger(__name__)


def _from_trace(traces: TraceStores, loaded: LoadedPolicy, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the answer of the step it names, from the tenant's trace store
    (:func:`~groundproxy.proxy.storage.feedback.label_target`: 404 / 409)."""
    by: LabelRef = "step_id" if "step_id" in data else "request_id"
    ref = str(data[by])  # its form checked by check_feedback
    settings = loaded.policy.traces
    if not settings.enabled:
        raise NotFoundError("traces are off for this tenant: give the answer itself")
    store = traces.get(loaded.policy.tenant)
    hit = label_target(store, by, ref, time.time() - settings.retention_hours * 3600.0)
    return {**data, "answer": hit.answer, "request_id": hit.request_id, "step_id": hit.step_id}


@router.post("/v1/groundproxy/feedback")
async def post_feedback(loaded: AdminTenant, data: JsonBody, serving: Served) -> dict[str, Any]:
    check_feedback(data)  # types and bounds (proxy.feedback_request): 400 naming the field
    data = {k: v for k, v in data.items() if v is not None}
    if "answer" in data and ("request_id" in data or "step_id" in data):
        raise BadRequestError("give the answer or a request/step id, not both", param="answer")
    if "request_id" in data and "step_id" in data:
        raise BadRequestError("give 'step_id' or 'request_id', not both", param="request_id")
    if "answer" not in data:
        if "request_id" not in data and "step_id" not in data:
            raise BadRequestError(
                "'answer' (or 'request_id' / 'step_id') is required", param="answer"
            )
        data = await anyio.to_thread.run_sync(_from_trace, serving.deps.traces, loaded, data)
    # a reviewer's label (an admin key): the source a fit may take as evidence (label_count)
    item = dataclasses.replace(parse_labelled(data), source="reviewer", key=CALLER.get())
    tenant = loaded.policy.tenant
    storage = serving.deps.storage
    saved, count = await anyio.to_thread.run_sync(storage.append_feedback, tenant, item)
    fid, label = saved.id, saved.label_hallucinated
    log.info("feedback_stored", label=label, count=count, from_trace=item.step_id is not None)
    return {
        "object": "groundproxy.feedback",
        "id": fid,
        "label_hallucinated": label,
        "count": count,
    }
