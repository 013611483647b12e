"""Document ids that must not collide: one id per document in one ingest, no silent cuts.

Before, a JSONL row id over 255 characters was cut to its last 255 (two long ids with the
same ending became one document) and the same id twice in one ingest kept the last row
without a word. Both are now errors that name the rows.
"""

from __future__ import annotations

from pathlib import Path

from groundproxy.errors import BadRequestError
from groundproxy.retrieval.names import MAX_NAME_CHARS, sanitize_doc_id


def row_doc_id(prefix: str, row_id: str | int, where: str) -> str:
    """The doc id of a JSONL row: ``<prefix>/<row id>``, sanitized but never shortened."""
    raw = f"{prefix}/{row_id}"
    if len(raw.strip()) > MAX_NAME_CHARS:
        raise BadRequestError(
            f"{where}: the row's document id is {len(raw)} characters (with the file's "
            f"prefix); the limit is {MAX_NAME_CHARS}: shorten the id, it is not cut",
            param="id",
        )
    return sanitize_doc_id(raw)


def check_inside(root: Path, file: Path) -> None:
    """Refuse a file (a symlink) of folder ``root`` that resolves outside it."""
    real_root = root.resolve()
    real = file.resolve()
    if real != real_root and real_root not in real.parents:
        raise BadRequestError(
            f"refusing {file}: it is a symlink to a file outside {root} "
            "(pass --follow-symlinks to ingest such files)"
        )


class UniqueIds:
    """Refuses a second document with an id already seen in this ingest."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}

    def add(self, doc_id: str, where: str) -> None:
        first = self._first.setdefault(doc_id, where)
        if first != where:
            raise BadRequestError(
                f"document id {doc_id[:120]!r} appears twice in one ingest: {first} and "
                f"{where}; nothing was written",
                param="id",
            )
