"""Ingestion entry points used by the CLI and the HTTP admin API (one atomic commit each)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from groundproxy.guards.types import Embedder
from groundproxy.retrieval.ids import UniqueIds
from groundproxy.retrieval.names import validate_doc_id
from groundproxy.retrieval.readers import SourceDocument, read_documents
from groundproxy.retrieval.writer import IndexWriter


@dataclass(frozen=True)
class IngestResult:
    """Counts of one ingest; ``version`` is the index version after it."""

    added: int
    replaced: int
    unchanged: int
    chunks_added: int
    version: int


@dataclass(frozen=True)
class DeleteResult:
    """Ids removed and ids that were not in the index; ``version`` after the delete."""

    deleted: list[str]
    missing: list[str]
    version: int


def _ingest(
    data_dir: Path,
    tenant: str,
    docs: Iterable[SourceDocument],
    embedder: Embedder,
    progress: bool,
) -> IngestResult:
    from tqdm import tqdm

    counts = {"added": 0, "replaced": 0, "unchanged": 0}
    with IndexWriter(data_dir, tenant, embedder) as writer:
        bar = tqdm(docs, desc=f"ingest {tenant}", unit="doc", file=sys.stderr,
                   disable=not progress)
        unique = UniqueIds()
        for i, doc in enumerate(bar):
            unique.add(doc.doc_id, doc.source_path or f"documents[{i}]")
            counts[writer.upsert(doc.doc_id, doc.text, doc.source_path)] += 1
            bar.set_postfix(chunks=writer.chunks_added, refresh=False)
        bar.close()
        version = writer.commit()
        chunks_added = writer.chunks_added
    return IngestResult(counts["added"], counts["replaced"], counts["unchanged"],
                        chunks_added, version)


def ingest_paths(
    data_dir: Path,
    tenant: str,
    paths: Sequence[Path],
    embedder: Embedder,
    progress: bool = True,
) -> IngestResult:
    """Ingest files and folders (.txt .md .html .pdf .jsonl) with a progress bar on stderr."""
    return _ingest(data_dir, tenant, read_documents(paths), embedder, progress)


def ingest_texts(
    data_dir: Path,
    tenant: str,
    docs: Sequence[tuple[str, str]],
    embedder: Embedder,
) -> IngestResult:
    """Ingest ``(doc_id, text)`` pairs; every id is validated before anything is written."""
    sources = [SourceDocument(validate_doc_id(doc_id), text, None) for doc_id, text in docs]
    return _ingest(data_dir, tenant, sources, embedder, progress=False)


def delete_documents(data_dir: Path, tenant: str, doc_ids: Sequence[str]) -> DeleteResult:
    """Delete documents by id in one atomic commit."""
    ids = [validate_doc_id(doc_id) for doc_id in doc_ids]
    deleted: list[str] = []
    missing: list[str] = []
    with IndexWriter(data_dir, tenant, None) as writer:
        for doc_id in ids:
            (deleted if writer.delete(doc_id) else missing).append(doc_id)
        version = writer.commit()
    return DeleteResult(deleted, missing, version)
