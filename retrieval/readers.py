"""Read source files into documents: .txt .md .html/.htm .pdf .jsonl.

A file's doc id is its path relative to the folder that was given (or its base name when
the file itself was given); a JSONL row's is ``<file id without .jsonl>/<row id>``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from groundproxy.errors import BadRequestError
from groundproxy.retrieval.html_text import html_to_text
from groundproxy.retrieval.ids import check_inside, row_doc_id
from groundproxy.retrieval.names import sanitize_doc_id

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | {".pdf", ".jsonl"}
_ID_KEYS = ("id", "doc_id")
_TEXT_KEYS = ("text", "content", "context")


@dataclass(frozen=True)
class SourceDocument:
    """One document to ingest."""

    doc_id: str
    text: str
    source_path: str | None


@dataclass(frozen=True)
class SourceFile:
    """One file to read: given directly (``root`` None) or found in the folder ``root``."""

    root: Path | None
    path: Path
    rel: str  # its doc id (the path relative to ``root``, or the base name)
    size: int  # bytes (0 when it cannot be stat-ed: reading it says why)


def list_sources(paths: Sequence[Path]) -> list[SourceFile]:
    """Every file an ingest of ``paths`` reads, listed before any is read (so a progress bar
    knows its total, and a path that does not exist, or a file given directly of a type not
    supported, is an error before anything is read)."""
    out: list[SourceFile] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for file, rel in _walk(path):
                if file.suffix.lower() not in SUPPORTED_SUFFIXES:
                    log.warning("skipping %s: unsupported file type", file)
                    continue
                out.append(SourceFile(path, file, rel, _size(file)))
        elif path.is_file():
            if path.suffix.lower() not in SUPPORTED_SUFFIXES:
                raise BadRequestError(
                    f"cannot ingest {path}: unsupported file type {path.suffix or '(none)'} "
                    f"(supported: {', '.join(sorted(SUPPORTED_SUFFIXES))})"
                )
            out.append(SourceFile(None, path, path.name, _size(path)))
        else:
            raise BadRequestError(f"cannot ingest {path}: no such file or folder")
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # a dangling symlink: reading it reports it
        return 0


def read_source(
    src: SourceFile, skipped: list[str] | None = None, follow_symlinks: bool = False
) -> Iterator[SourceDocument]:
    """The documents of one listed file (:func:`read_documents` for the rules)."""
    if src.root is None:
        yield from read_file(src.path, src.rel)
    else:
        yield from _read_checked(src.root, src.path, src.rel, skipped, follow_symlinks)


def read_documents(
    paths: Sequence[Path],
    skipped: list[str] | None = None,
    follow_symlinks: bool = False,
) -> Iterator[SourceDocument]:
    """Documents from files and folders (walked recursively, hidden entries skipped).

    In a folder, a symlink that resolves outside the folder is refused unless
    ``follow_symlinks``. With ``skipped`` (a list), a file that cannot be read is skipped
    and ``"<file>: <why>"`` appended to it; otherwise its error ends the ingest.
    """
    for src in list_sources(paths):
        yield from read_source(src, skipped, follow_symlinks)


def _read_checked(
    root: Path, file: Path, rel: str, skipped: list[str] | None, follow_symlinks: bool
) -> list[SourceDocument]:
    """One folder file's documents, all or none (a bad row skips the whole file)."""
    try:
        if not follow_symlinks:
            check_inside(root, file)
        return list(read_file(file, rel))
    except BadRequestError as exc:
        if skipped is None:
            raise BadRequestError(f"{exc.message} (--skip-errors skips such files)") from exc
        log.warning("skipped %s: %s", file, exc.message)
        skipped.append(f"{file}: {exc.message}")
        return []


def _walk(root: Path) -> Iterator[tuple[Path, str]]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith("."):
                file = Path(dirpath) / name
                yield file, file.relative_to(root).as_posix()


def read_file(path: Path, doc_id: str) -> Iterator[SourceDocument]:
    """The document(s) in one file; ``doc_id`` is the file's id (sanitized here)."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        prefix = sanitize_doc_id(
            doc_id[: -len(path.suffix)] if doc_id.endswith(path.suffix) else doc_id
        )
        yield from _read_jsonl(path, prefix)
        return
    if suffix == ".pdf":
        text = _read_pdf(path)
    elif suffix in HTML_SUFFIXES:
        text = html_to_text(_read_text(path))
    else:
        text = _read_text(path)
    if not text.strip():
        log.warning("skipping %s: no text", path)
        return
    yield SourceDocument(sanitize_doc_id(doc_id), text, str(path))


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BadRequestError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _read_text(path: Path) -> str:
    data = _read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        log.warning("%s is not UTF-8; reading it as cp1252/latin-1", path)
        try:
            return data.decode("cp1252")
        except UnicodeDecodeError:
            return data.decode("latin-1")


def _read_pdf(path: Path) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings: the error says enough
    try:
        reader = PdfReader(path)
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except OSError as exc:
        raise BadRequestError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise BadRequestError(f"cannot read PDF {path}: {exc}") from exc
    return "\n\n".join(p for p in pages if p)


def _field(row: dict[str, object], keys: tuple[str, ...]) -> object:
    for key in keys:
        if row.get(key) is not None:
            return row[key]
    return None


def _read_jsonl(path: Path, prefix: str) -> Iterator[SourceDocument]:
    text = _read_text(path)
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise BadRequestError(f"{path}:{line_no}: invalid JSON: {exc}") from exc
        if not isinstance(row, dict):
            raise BadRequestError(f"{path}:{line_no}: a row must be a JSON object")
        body = _field(row, _TEXT_KEYS)
        if body is None or (isinstance(body, str) and not body.strip()):
            log.warning("%s:%d: no text/content/context; row skipped", path, line_no)
            continue
        if not isinstance(body, str):
            raise BadRequestError(f"{path}:{line_no}: the row's text must be a string")
        row_id = _field(row, _ID_KEYS)
        if row_id is None:
            row_id = line_no
        if not isinstance(row_id, str | int):
            raise BadRequestError(f"{path}:{line_no}: the row id must be a string or integer")
        where = f"{path}:{line_no}"
        yield SourceDocument(row_doc_id(prefix, row_id, where), body, where)
