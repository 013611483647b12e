"""The verifier's encode over stored sentence vectors: found ones are not embedded again.

:func:`stored_first` wraps an embedder's ``encode``: texts whose vectors an index stored at
ingest (guards.types.SentenceVectors, retrieval.sentence_vectors) are taken from there; the
rest (claims, request context, sentences of an index without stored vectors) go to the
embedder in ONE call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from groundproxy.guards.types import Pair, SentenceVectors
from groundproxy.models.features import EMB_DIM, Encode


def stores_of(pairs: Sequence[Pair], embedder: str) -> list[SentenceVectors]:
    """The distinct stores the pairs point at whose vectors come from ``embedder``."""
    found: dict[int, SentenceVectors] = {}
    for p in pairs:
        if p.vectors is not None and p.vectors.embedder == embedder:
            found.setdefault(id(p.vectors), p.vectors)
    return list(found.values())


def stored_first(encode: Encode, stores: Sequence[SentenceVectors]) -> Encode:
    """``encode`` that looks each text up in ``stores`` first (one embedder call for the rest)."""
    if not stores:
        return encode

    def lookup_then_encode(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        items = list(texts)
        out = np.empty((len(items), EMB_DIM), dtype=np.float32)
        missing = list(range(len(items)))
        for store in stores:
            if not missing:
                break
            vectors = store.lookup([items[i] for i in missing])
            still: list[int] = []
            for i, v in zip(missing, vectors, strict=True):
                if v is None:
                    still.append(i)
                else:
                    out[i] = v
            missing = still
        if missing:
            out[missing] = encode([items[i] for i in missing])
        return out

    return lookup_then_encode
