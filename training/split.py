"""The train / validation split every training command shares: a row's split is decided by
its context (so no evidence text is shared across it), with one seed and one label map."""

from __future__ import annotations

import hashlib

TARGETS = {"supported": 0, "contradicted": 1, "unverifiable": 2, "not_supported": 3}
SEED = 20240611


def context_hash(text: str) -> int:
    return int(hashlib.sha1(text.encode("utf-8")).hexdigest()[:8], 16)


def in_validation(context: str, val_frac: float = 0.15) -> bool:
    """Whether a row falls in the held-out split: decided by its context (so no evidence
    text is shared across the split)."""
    return (context_hash(context) % 1000) < val_frac * 1000
