"""Tenant-scoped document admin API (admin keys only).

``POST /v1/groundproxy/documents``   {"documents": [{"id": "handbook.md", "text": "..."}]}
``DELETE /v1/groundproxy/documents`` {"ids": ["handbook.md"]}
``GET /v1/groundproxy/documents``    the tenant's documents (ids, hashes, chunk counts)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import structlog
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from groundproxy.guards.errors import BadRequestError
from groundproxy.proxy.auth import admin_tenant_for
from groundproxy.proxy.protocol import parse_json_body
from groundproxy.proxy.routes.chat import read_body
from groundproxy.proxy.state import AppState, app_state
from groundproxy.proxy.storage import EmbeddedStorage, Storage, delete_documents, ingest_texts

router = APIRouter()
log = structlog.get_logger(__name__)


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=255)
    text: str = Field(min_length=1)


class IngestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    documents: list[_Doc] = Field(min_length=1, max_length=10_000)


class DeleteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ids: list[str] = Field(min_length=1, max_length=10_000)


def _validate(model: type[BaseModel], data: dict[str, Any]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = ".".join(str(p) for p in err["loc"]) or None
        raise BadRequestError(f"'{param}': {err['msg']}", param=param) from exc


def _storage(state: AppState) -> Storage:
    return state.storage if state.storage is not None else EmbeddedStorage(state.settings.data)


async def _json(request: Request) -> dict[str, Any]:
    settings = app_state(request).settings
    raw = await read_body(request, settings.max_body_bytes)
    return parse_json_body(
        raw, max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth
    )


@router.post("/v1/groundproxy/documents")
async def add_documents(request: Request) -> dict[str, Any]:
    state = app_state(request)
    loaded = admin_tenant_for(request, state.policies)
    structlog.contextvars.bind_contextvars(tenant=loaded.policy.tenant)
    body: IngestBody = _validate(IngestBody, await _json(request))
    _, guard = state.require()
    docs = [(d.id, d.text) for d in body.documents]
    result = await anyio.to_thread.run_sync(
        lambda: ingest_texts(_storage(state), loaded.policy.index_name, docs, guard.embedder)
    )
    guard.indexes.invalidate(loaded.policy.index_name)
    log.info("documents_ingested", n=len(docs), version=result.version)
    return {"object": "groundproxy.ingest", **dataclasses.asdict(result)}


@router.delete("/v1/groundproxy/documents")
async def remove_documents(request: Request) -> dict[str, Any]:
    state = app_state(request)
    loaded = admin_tenant_for(request, state.policies)
    structlog.contextvars.bind_contextvars(tenant=loaded.policy.tenant)
    body: DeleteBody = _validate(DeleteBody, await _json(request))
    _, guard = state.require()
    result = await anyio.to_thread.run_sync(
        lambda: delete_documents(_storage(state), loaded.policy.index_name, body.ids)
    )
    guard.indexes.invalidate(loaded.policy.index_name)
    log.info("documents_deleted", n=len(body.ids), version=result.version)
    return {"object": "groundproxy.delete", **dataclasses.asdict(result)}


@router.get("/v1/groundproxy/documents")
async def list_documents(request: Request) -> dict[str, Any]:
    state = app_state(request)
    loaded = admin_tenant_for(request, state.policies)
    _, guard = state.require()
    index = guard.indexes.get(loaded.policy.index_name)
    return {
        "object": "list",
        "version": index.version,
        "data": [dataclasses.asdict(d) for d in index.documents()],
    }
