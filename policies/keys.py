"""API-key hashing: policies store only ``sha256:<hex>`` hashes, never raw keys.

A raw key is hashed once at the boundary (request auth, ``key_env`` at load) and
only its hash is kept or compared. Never log a raw key; a hash is not logged
either (it identifies a key).
"""

from __future__ import annotations

import hashlib
import hmac

from groundproxy.policies.schema import KEY_HASH_RE

HASH_PREFIX = "sha256:"


def hash_key(raw: str) -> str:
    """Return ``"sha256:" + hex(sha256(raw.encode("utf-8")))``."""
    return HASH_PREFIX + hashlib.sha256(raw.encode("utf-8")).hexdigest()


def is_key_hash(value: str) -> bool:
    """True when ``value`` is a well-formed key hash (``sha256:`` + 64 lower-case hex)."""
    return KEY_HASH_RE.match(value) is not None


def constant_time_equals(a: str, b: str) -> bool:
    """Compare two strings in time independent of where they differ."""
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def verify_key(raw: str, key_hash: str) -> bool:
    """True when ``raw`` hashes to ``key_hash`` (constant-time comparison)."""
    return constant_time_equals(hash_key(raw), key_hash)


def split_env_keys(value: str) -> list[str]:
    """Split a comma-separated list of raw keys (as in a ``key_env`` variable).

    Whitespace around each key is stripped and empty entries are dropped.
    """
    return [part.strip() for part in value.split(",") if part.strip()]
