"""``POST /v1/groundproxy/feedback``: a reviewer labels one answer (admin key of the tenant).

Body: either the answer itself, or the id of a step the proxy guarded (from the trace
store: ``request_id`` or ``step_id``; the answer as the upstream wrote it is looked up
there, in the calling tenant's store only)::

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

import time
from typing import Any

import anyio
import structlog
from fastapi import APIRouter

from groundproxy.errors import BadRequestError, NotFoundError
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.proxy.auth import AdminTenant
from groundproxy.proxy.body import JsonBody
from groundproxy.proxy.state import Served
from groundproxy.proxy.storage import answers
from groundproxy.proxy.storage.feedback import parse_labelled
from groundproxy.proxy.storage.sqlite_traces import TraceStores

router = APIRouter()
log = structlog.get_logger(__name__)
_FIELDS = {
    "answer",
    "question",
    "context",
    "label",
    "label_hallucinated",
    "claims",
    "request_id",
    "step_id",
    "logprobs",
}


def _from_trace(traces: TraceStores, loaded: LoadedPolicy, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the answer of the step it names, from the tenant's trace store."""
    ref = data.get("step_id") or data.get("request_id")
    if not isinstance(ref, str) or not ref or len(ref) > 128:
        raise BadRequestError("'request_id' / 'step_id' must be a short string", param="step_id")
    settings = loaded.policy.traces
    if not settings.enabled:
        raise NotFoundError("traces are off for this tenant: give the answer itself")
    store = traces.get(loaded.policy.tenant)
    not_before = time.time() - settings.retention_hours * 3600.0
    found = store.read(lambda conn: answers.recent(conn, not_before, 1, ref))
    if not found:
        raise NotFoundError(f"no guarded answer with id {ref!r} for this tenant")
    hit = found[0]
    return {**data, "answer": hit.original, "request_id": hit.request_id, "step_id": hit.step_id}


@router.post("/v1/groundproxy/feedback")
async def post_feedback(loaded: AdminTenant, data: JsonBody, serving: Served) -> dict[str, Any]:
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise BadRequestError(f"'{unknown[0]}' is not a field of feedback", param=unknown[0])
    if "answer" in data and ("request_id" in data or "step_id" in data):
        raise BadRequestError("give the answer or a request/step id, not both", param="answer")
    if "answer" not in data:
        if "request_id" not in data and "step_id" not in data:
            raise BadRequestError(
                "'answer' (or 'request_id' / 'step_id') is required", param="answer"
            )
        data = await anyio.to_thread.run_sync(_from_trace, serving.deps.traces, loaded, data)
    item = parse_labelled(data)
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
