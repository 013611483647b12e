"""A fake :class:`~groundproxy.guards.types.Embedder`: feature hashing of words and bigrams.

It is no semantic model: use it in tests and benchmarks of the storage layer where loading
a model would cost seconds. Deterministic across processes. A ``groundproxy serve`` or
``ingest`` process uses it when told by its import path, :data:`HASHING`
(``GROUNDPROXY_EMBEDDER=groundproxy.testing.embedders:HashingEmbedder``); the runtime
itself never imports this package.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

_WORD_RE = re.compile(r"\w+")

#: The import path that selects :class:`HashingEmbedder` (``Settings.embedder``,
#: ``GROUNDPROXY_EMBEDDER``, ``load_embedder``).
HASHING = "groundproxy.testing.embedders:HashingEmbedder"


class HashingEmbedder:
    """Unit vectors from hashed word unigrams and bigrams."""

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _bucket(self, token: str) -> tuple[int, float]:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` into an (n, dim) float32 array of unit vectors."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD_RE.findall(text.lower())
            tokens = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
            for token in tokens:
                bucket, sign = self._bucket(token)
                out[row, bucket] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm > 0.0:
                out[row] /= norm
            else:
                out[row, 0] = 1.0
        return out
