"""Redaction of secrets from text that leaves the process (client error bodies, logs).

Upstream error messages are the provider's text: some echo the key they were sent
(``Incorrect API key provided: Bearer sk-…``). Before such text is returned or logged it
goes through :func:`redact`, which removes every upstream key this process has configured
(:func:`remember_secret`, called where a key is read from the environment) and anything
key-shaped: ``Bearer <token>``, ``sk-…``/``pk-…``/``rk-…`` style keys, ``key=…`` pairs and
long opaque tokens.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from typing import Any

from groundproxy.errors import GroundproxyError, GuardError
from groundproxy.retrieval.chunk_store import DocumentInfo

REDACTED = "[redacted]"
_MIN_SECRET_CHARS = 8
_secrets: set[str] = set()
_lock = threading.Lock()

_PATTERNS = (
    # Authorization header values: "Bearer xyz", "Basic xyz"
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"),
    # provider-style keys: sk-…, sk-proj-…, pk_live_…, rk-…, xai-…, gsk_…, AIza…, hf_…
    re.compile(r"\b(?:sk|pk|rk|gsk|xai|hf)[-_][A-Za-z0-9._-]{8,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"),
    # key=value / "api_key": "value" pairs
    re.compile(
        r"(?i)\b(api[-_]?key|access[-_]?token|secret|password|token)(\"?\s*[:=]\s*\"?)"
        r"[^\s\"',;]{4,}"
    ),
    # long opaque tokens (hex or base64-ish runs of 32+ characters)
    re.compile(r"\b[A-Za-z0-9+/_-]{32,}={0,2}"),
)


def remember_secret(value: str | None) -> None:
    """Register a configured secret (an upstream API key) so :func:`redact` removes it."""
    if value and len(value) >= _MIN_SECRET_CHARS:
        with _lock:
            _secrets.add(value)


def _pair(match: re.Match[str]) -> str:
    if match.re.groups >= 2 and match.group(2) is not None:
        return f"{match.group(1)}{match.group(2)}{REDACTED}"
    if match.re.groups == 1:
        return f"{match.group(1)} {REDACTED}"
    return REDACTED


def redact(text: str) -> str:
    """``text`` without configured secrets and key-shaped strings."""
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(_pair, text)
    return text


# An absolute POSIX path of 2+ segments, not inside a URL or a relative id ("a/b/c").
_ABS_PATH = re.compile(r"(?<![\w.~:/-])(?:/[^\s'\"/:;,()\[\]<>]+){2,}/?")


def scrub_paths(text: str) -> str:
    """``text`` with every absolute server path cut to ``…/<file name>``: clients see file
    and document names, never where they live on the server."""
    return _ABS_PATH.sub(lambda m: "…/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)


def public_error(err: Exception) -> Exception:
    """``err`` as a guard report's explanation may say it to clients (the body, stream
    events, the trace store, the inspector): absolute server paths (a calibration file, the
    models folder, an adapter) cut to their file names."""
    if isinstance(err, GroundproxyError):
        return GuardError(scrub_paths(err.message))
    return err


def public_document(info: DocumentInfo) -> dict[str, Any]:
    """A document's metadata as clients see it: the id, never the server-side file path."""
    fields = dataclasses.asdict(info)
    fields.pop("source_path", None)
    return fields
