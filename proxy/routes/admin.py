"""Tenant-scoped document admin API (admin keys only).

``POST /v1/groundproxy/documents``   {"documents": [{"id": "handbook.md", "text": "..."}]}
``DELETE /v1/groundproxy/documents`` {"ids": ["handbook.md"]}
``GET /v1/groundproxy/documents``    the tenant's documents (ids, hashes, chunk counts)
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import anyio
import structlog
from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from groundproxy.proxy.auth import AdminTenant
from groundproxy.proxy.openai.bounds import DocumentText
from groundproxy.proxy.openai.chat_request import validated
from groundproxy.proxy.routes.body import JsonBody
from groundproxy.proxy.state import Parts, Served
from groundproxy.proxy.storage.backends import (
    delete_documents,
    ingest_texts,
)
from groundproxy.proxy.upstream.redact import public_document

router = APIRouter()
log = structlog.get_logger(__name__)


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=255)
    text: DocumentText  # no NUL, no bidi overrides (proxy.openai.bounds)


class IngestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    documents: list[_Doc] = Field(min_length=1, max_length=10_000)


class DeleteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ids: list[str] = Field(min_length=1, max_length=10_000)


async def _ingest_body(data: JsonBody) -> IngestBody:
    return validated(IngestBody, data)


async def _delete_body(data: JsonBody) -> DeleteBody:
    return validated(DeleteBody, data)


Ingest = Annotated[IngestBody, Depends(_ingest_body)]
Delete = Annotated[DeleteBody, Depends(_delete_body)]


@router.post("/v1/groundproxy/documents")
async def add_documents(
    loaded: AdminTenant, body: Ingest, parts: Parts, serving: Served
) -> dict[str, Any]:
    docs = [(d.id, d.text) for d in body.documents]
    result = await anyio.to_thread.run_sync(
        lambda: ingest_texts(serving.deps.storage, loaded.policy.index_name, docs, parts.embedder)
    )
    parts.indexes.invalidate(loaded.policy.index_name)
    log.info("documents_ingested", n=len(docs), version=result.version)
    return {"object": "groundproxy.ingest", **dataclasses.asdict(result)}


@router.delete("/v1/groundproxy/documents")
async def remove_documents(
    loaded: AdminTenant, body: Delete, parts: Parts, serving: Served
) -> dict[str, Any]:
    result = await anyio.to_thread.run_sync(
        lambda: delete_documents(serving.deps.storage, loaded.policy.index_name, body.ids)
    )
    parts.indexes.invalidate(loaded.policy.index_name)
    log.info("documents_deleted", n=len(body.ids), version=result.version)
    return {"object": "groundproxy.delete", **dataclasses.asdict(result)}


@router.get("/v1/groundproxy/documents")
async def list_documents(loaded: AdminTenant, parts: Parts) -> dict[str, Any]:
    index = parts.indexes.get(loaded.policy.index_name)
    return {
        "object": "list",
        "version": index.version,
        "data": [public_document(d) for d in index.documents()],
    }
