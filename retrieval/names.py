"""Validation of tenant names and document ids (they become paths and header values)."""

from __future__ import annotations

import re

from groundproxy.errors import BadRequestError

MAX_NAME_CHARS = 255
_TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# Besides letters and digits (any script), a doc id may hold these characters.
_DOC_ID_EXTRA = frozenset("/._-~@+: ")
_UNSAFE_RUN_RE = re.compile(r"_{2,}")


def validate_tenant(name: str) -> str:
    """Return ``name`` if it is a safe single path component, else raise BadRequestError.

    Allowed: ASCII letters, digits, '_', '.', '-', starting with a letter or digit,
    at most 255 characters (so never '.', '..', a hidden name, a '/' or a NUL).
    """
    if not isinstance(name, str) or not name:
        raise BadRequestError("tenant name must be a non-empty string", param="tenant")
    if len(name) > MAX_NAME_CHARS or not _TENANT_RE.fullmatch(name):
        raise BadRequestError(
            f"invalid tenant name {name[:80]!r}: use letters, digits, '_', '.', '-' "
            f"(starting with a letter or digit, at most {MAX_NAME_CHARS} characters)",
            param="tenant",
        )
    return name


def _doc_id_problem(doc_id: str) -> str | None:
    if not doc_id:
        return "it is empty"
    if len(doc_id) > MAX_NAME_CHARS:
        return f"it is longer than {MAX_NAME_CHARS} characters"
    bad = sorted({c for c in doc_id if not (c.isalnum() or c in _DOC_ID_EXTRA)})
    if bad:
        return f"it contains {''.join(bad)!r}"
    if doc_id.startswith("/"):
        return "it is an absolute path"
    if doc_id != doc_id.strip():
        return "it starts or ends with a space"
    if any(part in ("", ".", "..") for part in doc_id.split("/")):
        return "it has an empty, '.' or '..' path segment"
    return None


def validate_doc_id(doc_id: str) -> str:
    """Return ``doc_id`` if valid, else raise BadRequestError.

    A doc id is 1–255 characters of letters, digits and ``/ . - _ ~ @ + :`` or inner
    spaces; it is a relative path without empty, '.' or '..' segments.
    """
    if not isinstance(doc_id, str):
        raise BadRequestError("document id must be a string", param="id")
    problem = _doc_id_problem(doc_id)
    if problem is not None:
        raise BadRequestError(f"invalid document id {doc_id[:80]!r}: {problem}", param="id")
    return doc_id


def sanitize_doc_id(raw: str) -> str:
    """Turn any string (a file path, a JSONL row id) into a valid doc id, or raise."""
    chars = [c if (c.isalnum() or c in _DOC_ID_EXTRA) else "_" for c in raw.strip()]
    parts = [p.strip() for p in "".join(chars).split("/")]
    parts = [_UNSAFE_RUN_RE.sub("_", p) for p in parts if p not in ("", ".", "..")]
    cleaned = "/".join(parts)
    if len(cleaned) > MAX_NAME_CHARS:
        cleaned = cleaned[-MAX_NAME_CHARS:].lstrip("/ ")
    return validate_doc_id(cleaned)
