"""Ingestion entry points used by the CLI and the HTTP admin API (one atomic commit each)."""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from groundproxy.guards.types import Embedder
from groundproxy.retrieval.ids import UniqueIds
from groundproxy.retrieval.names import validate_doc_id
from groundproxy.retrieval.readers import SourceDocument, read_documents
from groundproxy.retrieval.writer import IndexWriter

_CHARS_PER_CHUNK = 450  # the progress bar's first guess, corrected per document
_P = ParamSpec("_P")
_R = TypeVar("_R")
_Target = TypeVar("_Target")


@dataclass(frozen=True)
class IngestResult:
    """Counts of one ingest; ``version`` is the index version after it."""

    added: int
    replaced: int
    unchanged: int
    chunks_added: int
    version: int
    skipped: list[str] = field(default_factory=list)  # "<file>: <why>" (--skip-errors)


@dataclass(frozen=True)
class DeleteResult:
    """Ids removed and ids that were not in the index; ``version`` after the delete."""

    deleted: list[str]
    missing: list[str]
    version: int


# (tenant, embedder or None) -> a writer: IndexWriter on local disk, PgIndexWriter on Postgres
WriterOpener = Callable[[str, Embedder | None], Any]


def writer_opener(data_dir: Path) -> WriterOpener:
    """Opens the embedded backend's ``IndexWriter`` under ``data_dir``."""
    return functools.partial(IndexWriter, data_dir)


def with_writer_of(
    opener_of: Callable[[_Target], WriterOpener],
    fn: Callable[Concatenate[WriterOpener, _P], _R],
) -> Callable[Concatenate[_Target, _P], _R]:
    """``fn``, taking instead of its writer opener what ``opener_of`` turns into one (a data
    folder, a storage backend)."""

    def run(target: _Target, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return fn(opener_of(target), *args, **kwargs)

    run.__doc__ = fn.__doc__
    return run


def ingest_docs(
    open_writer: WriterOpener,
    tenant: str,
    docs: Iterable[SourceDocument],
    embedder: Embedder,
    progress: bool,
) -> IngestResult:
    from tqdm import tqdm

    counts = {"added": 0, "replaced": 0, "unchanged": 0}
    # The bar counts chunks embedded; its total grows by an estimate as each document is
    # read and is corrected once the document is chunked, so the ETA holds for big files.
    bar = tqdm(
        total=0, desc=f"ingest {tenant}", unit="chunk", file=sys.stderr, disable=not progress
    )
    with open_writer(tenant, embedder) as writer:
        writer.on_embedded = bar.update
        unique = UniqueIds()
        for i, doc in enumerate(docs):
            unique.add(doc.doc_id, doc.source_path or f"documents[{i}]")
            estimate = max(1, len(doc.text) // _CHARS_PER_CHUNK)
            bar.total += estimate
            bar.refresh()
            before = writer.chunks_added
            counts[writer.upsert(doc.doc_id, doc.text, doc.source_path)] += 1
            bar.total += writer.chunks_added - before - estimate
            bar.set_postfix(docs=i + 1, refresh=False)
        version = writer.commit()
        chunks_added = writer.chunks_added
    bar.close()
    return IngestResult(
        counts["added"], counts["replaced"], counts["unchanged"], chunks_added, version
    )


@dataclass(frozen=True)
class FileOptions:
    """How files are read: ``skip_errors`` — a file that cannot be read is skipped (reported
    in ``skipped``) instead of aborting the ingest; ``follow_symlinks`` — a symlink in a
    folder that points outside it is ingested instead of refused."""

    skip_errors: bool = False
    follow_symlinks: bool = False


def ingest_paths_with(
    open_writer: WriterOpener,
    tenant: str,
    paths: Sequence[Path],
    embedder: Embedder,
    progress: bool = True,
    files: FileOptions | None = None,
) -> IngestResult:
    """Ingest files and folders (.txt .md .html .pdf .jsonl) with a progress bar on stderr,
    read as ``files`` says (default: a bad file aborts, outside symlinks are refused)."""
    files = files if files is not None else FileOptions()
    skipped: list[str] = []
    docs = read_documents(
        paths,
        skipped=skipped if files.skip_errors else None,
        follow_symlinks=files.follow_symlinks,
    )
    result = ingest_docs(open_writer, tenant, docs, embedder, progress)
    return dataclasses.replace(result, skipped=skipped)


def ingest_texts_with(
    open_writer: WriterOpener,
    tenant: str,
    docs: Sequence[tuple[str, str]],
    embedder: Embedder,
) -> IngestResult:
    """Ingest ``(doc_id, text)`` pairs; every id is validated before anything is written."""
    return ingest_docs(open_writer, tenant, text_sources(docs), embedder, False)


def text_sources(docs: Sequence[tuple[str, str]]) -> list[SourceDocument]:
    """``(doc_id, text)`` pairs as sources; every id is validated before anything is written."""
    return [SourceDocument(validate_doc_id(doc_id), text, None) for doc_id, text in docs]


def delete_docs(open_writer: WriterOpener, tenant: str, doc_ids: Sequence[str]) -> DeleteResult:
    """Delete documents by id in one atomic commit of the writer ``open_writer`` opens."""
    ids = [validate_doc_id(doc_id) for doc_id in doc_ids]
    deleted: list[str] = []
    missing: list[str] = []
    with open_writer(tenant, None) as writer:
        for doc_id in ids:
            (deleted if writer.delete(doc_id) else missing).append(doc_id)
        version = writer.commit()
    return DeleteResult(deleted, missing, version)


# the same entry points on the embedded backend's data folder (``data_dir`` first)
ingest_paths = with_writer_of(writer_opener, ingest_paths_with)
ingest_texts = with_writer_of(writer_opener, ingest_texts_with)
delete_documents = with_writer_of(writer_opener, delete_docs)
