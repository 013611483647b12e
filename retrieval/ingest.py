"""Ingestion entry points used by the CLI and the HTTP admin API (one atomic commit each)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from groundproxy.errors import BadRequestError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.ids import UniqueIds
from groundproxy.retrieval.ingest_progress import IngestBar, estimate_chunks
from groundproxy.retrieval.names import validate_doc_id
from groundproxy.retrieval.readers import (
    SUPPORTED_SUFFIXES,
    SourceDocument,
    list_sources,
    read_source,
)
from groundproxy.retrieval.writer import IndexWriter

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


# One source of documents (a file, or one text): its chunk estimate and its documents, read
# lazily when the ingest reaches it.
Source = tuple[int, Iterable[SourceDocument]]


def ingest_docs(
    open_writer: WriterOpener,
    tenant: str,
    sources: Sequence[Source],
    embedder: Embedder,
    progress: bool,
) -> IngestResult:
    """Upsert every document of ``sources`` in one commit; the bar (``progress``) counts the
    chunks embedded against a total known from the start (retrieval.ingest_progress)."""
    counts = {"added": 0, "replaced": 0, "unchanged": 0}
    estimates = [n for n, _ in sources]
    # the writer first: a bad tenant name or data folder is an error before any bar shows
    with open_writer(tenant, embedder) as writer, IngestBar(tenant, estimates, progress) as bar:
        writer.on_embedded = bar.embedded
        unique = UniqueIds()
        for _, docs in sources:
            for doc in docs:
                where = doc.source_path or f"documents[{sum(counts.values())}]"
                unique.add(doc.doc_id, where)
                before = writer.chunks_added
                counts[writer.upsert(doc.doc_id, doc.text, doc.source_path)] += 1
                bar.document(writer.chunks_added - before)
            bar.source_done()
        version = writer.commit()
        chunks_added = writer.chunks_added
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
    read as ``files`` says (default: a bad file aborts, outside symlinks are refused).

    The files are listed first (a missing path, or nothing to ingest, is an error before
    anything is read)."""
    options = files if files is not None else FileOptions()
    found = list_sources(paths)
    if not found:
        given = ", ".join(str(p) for p in paths)
        raise BadRequestError(
            f"nothing to ingest in {given}: no {' '.join(sorted(SUPPORTED_SUFFIXES))} file"
        )
    skipped: list[str] = []
    keep = skipped if options.skip_errors else None
    sources = [
        (estimate_chunks(f.size), read_source(f, keep, options.follow_symlinks)) for f in found
    ]
    result = ingest_docs(open_writer, tenant, sources, embedder, progress)
    return dataclasses.replace(result, skipped=skipped)


def ingest_texts_with(
    open_writer: WriterOpener,
    tenant: str,
    docs: Sequence[tuple[str, str]],
    embedder: Embedder,
) -> IngestResult:
    """Ingest ``(doc_id, text)`` pairs; every id is validated before anything is written."""
    sources = [(estimate_chunks(len(d.text)), [d]) for d in text_sources(docs)]
    return ingest_docs(open_writer, tenant, sources, embedder, False)


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
