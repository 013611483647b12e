"""Read-only provenance API for the caller's own tenant (any key of the tenant, admin or not).

``GET /v1/groundproxy/documents/{doc_id}``                  the document's metadata and chunks
``GET /v1/groundproxy/documents/{doc_id}?chunk=c3``         plus the cited chunk's passage
``GET /v1/groundproxy/documents/{doc_id}?start=40&end=90``  plus the passage at those offsets
``GET /v1/groundproxy/traces/{trace_id}``                   the trace's DAG and error stages

A document or trace of another tenant is a plain 404 (never 403): existence does not leak.
"""

from __future__ import annotations

import re
from typing import Any

import anyio
import structlog
from fastapi import APIRouter, Request

from groundproxy.errors import BadRequestError, NotFoundError
from groundproxy.guards import final_step, walk_back
from groundproxy.proxy.auth import ReaderTenant
from groundproxy.proxy.serving.traces import TRACE_ID_RE
from groundproxy.proxy.state import Parts, Served
from groundproxy.retrieval.chunk_store import DocumentRecord

router = APIRouter()
log = structlog.get_logger(__name__)
MAX_PASSAGE_CHARS = 100_000
_ASCII_INT = re.compile(r"[0-9]{1,15}")


def _int_param(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not _ASCII_INT.fullmatch(raw.strip()):  # not str.isdigit: '²' and '٣' are digits
        raise BadRequestError(f"'{name}' must be a non-negative integer", param=name)
    return int(raw)


def _passage(request: Request, doc: DocumentRecord) -> dict[str, Any] | None:
    chunk_id = request.query_params.get("chunk")
    start, end = _int_param(request, "start"), _int_param(request, "end")
    if chunk_id is not None and (start is not None or end is not None):
        raise BadRequestError("give either 'chunk' or 'start'/'end', not both", param="chunk")
    if chunk_id is not None:
        chunk = next((c for c in doc.chunks if c.chunk_id == chunk_id), None)
        if chunk is None:
            raise NotFoundError(f"document {doc.doc_id!r} has no chunk {chunk_id[:40]!r}")
        return {
            "chunk": chunk.chunk_id,
            "span": [chunk.start, chunk.end],
            "text": chunk.text,
            "content_hash": chunk.content_hash,
            "index_version": chunk.index_version,
        }
    if start is None and end is None:
        return None
    start = 0 if start is None else start
    end = len(doc.text) if end is None else end
    if not start < end <= len(doc.text):
        raise BadRequestError(
            f"need 0 <= start < end <= {len(doc.text)} (the document's length)", param="end"
        )
    if end - start > MAX_PASSAGE_CHARS:
        raise BadRequestError(f"a passage is at most {MAX_PASSAGE_CHARS} characters", param="end")
    chunks = [c.chunk_id for c in doc.chunks if c.start < end and c.end > start]
    return {"span": [start, end], "text": doc.text[start:end], "chunks": chunks}


@router.get("/v1/groundproxy/documents/{doc_id:path}")
async def get_document(
    doc_id: str, request: Request, loaded: ReaderTenant, parts: Parts
) -> dict[str, Any]:
    index = parts.indexes.get(loaded.policy.index_name)
    doc = await anyio.to_thread.run_sync(index.get_document, doc_id)
    if doc is None:
        raise NotFoundError(f"no document {doc_id[:120]!r} in this tenant's index")
    body: dict[str, Any] = {
        "object": "groundproxy.document",
        "id": doc.doc_id,
        "content_hash": doc.content_hash,
        "index_version": index.version,
        "ingested_at": doc.ingested_at,
        "length": len(doc.text),
        "chunks": [
            {
                "chunk": c.chunk_id,
                "span": [c.start, c.end],
                "content_hash": c.content_hash,
                "index_version": c.index_version,
            }
            for c in doc.chunks
        ],
    }
    passage = _passage(request, doc)
    if passage is not None:
        body["passage"] = passage
    return body


@router.get("/v1/groundproxy/traces/{trace_id}")
async def get_trace(
    trace_id: str, loaded: ReaderTenant, parts: Parts, serving: Served
) -> dict[str, Any]:
    if not TRACE_ID_RE.match(trace_id):
        raise NotFoundError("no such trace for this tenant")
    traces = serving.deps.traces
    if not loaded.policy.traces.enabled:
        raise NotFoundError("traces are disabled for this tenant (policy traces.enabled)")
    settings = loaded.policy.traces
    store = traces.get(loaded.policy.tenant)

    def build() -> dict[str, Any]:
        import time

        not_before = time.time() - settings.retention_hours * 3600.0
        own, stored = store.trace(trace_id, not_before)
        if not own:
            raise NotFoundError("no such trace for this tenant")
        walk_nodes = {s: n.walk_node() for s, n in stored.items()}
        final = final_step(walk_nodes, own)
        found = walk_back(walk_nodes, final, parts.embedder.encode) if final else []
        ordered = sorted(stored.values(), key=lambda n: (n.created, n.step_id))
        return {
            "object": "groundproxy.trace",
            "trace_id": trace_id,
            "final_step": final,
            "nodes": [n.public() for n in ordered],
            "unsupported": [
                {
                    "claim": u.claim,
                    "verdict": u.verdict,
                    "error_step": u.error_step,
                    "explanation": u.explanation,
                    "final_verdict": u.final_verdict,
                    "path": list(u.path),
                }
                for u in found
            ],
        }

    return await anyio.to_thread.run_sync(build)
