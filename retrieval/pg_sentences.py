"""The verifier's evidence sentences on PostgreSQL: vectors and token states made at ingest.

The twin of :mod:`groundproxy.retrieval.sentence_vectors` and
:mod:`groundproxy.retrieval.sentence_tokens` for the shared backend. Table ``gp_sentences``
(migration 2) holds one row per (tenant, sentence key): the sentence's unit vector (float32
bytes) and, unless ``GROUNDPROXY_TOKEN_STATES=0``, its unit token states (float16 bytes,
``n_tokens`` rows; a row stored without them gets them when an ingest keeping them meets
the sentence again). :func:`store_sentences` writes them inside the ingest's transaction
(:class:`~groundproxy.retrieval.pg_writer.PgIndexWriter`), so they are published with its
commit or not at all; :class:`PgSentences` reads them for the guard (the ``SentenceVectors``
protocol of the verifier, the ``StoredStates`` one of the token alignment): one statement
per look-up, by the 64-bit keys of the exact texts. Only an all-MiniLM-L6-v2 index gets
them; a sentence not found is embedded live, as with the file backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.errors import IndexStoreError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.pg_pool import PgPool
from groundproxy.retrieval.sentence_tokens import store_token_states
from groundproxy.retrieval.sentence_vectors import (
    StatesEncoder,
    chunk_sentences,
    sentence_key,
    stores_sentences,
)

Vector = npt.NDArray[np.float32]
States = npt.NDArray[np.float16]
_COPY = "COPY gp_sentences (tenant, key, vector, n_tokens, states) FROM STDIN"


def signed_key(text: str) -> int:
    """The sentence's 64-bit key as PostgreSQL's signed BIGINT."""
    key = sentence_key(text)
    return key - (1 << 64) if key >= (1 << 63) else key


def store_sentences(conn: Any, tenant: str, chunks: Sequence[str], embedder: Embedder) -> int:
    """Embed and insert (in ``conn``'s open transaction) the evidence sentences of
    ``chunks`` the tenant has not stored yet; returns how many. Nothing for an embedder
    other than the verifier's backbone."""
    if not stores_sentences(embedder.name, embedder.dim):
        return 0
    todo: dict[int, str] = {}
    for chunk in chunks:
        for s in chunk_sentences(chunk):
            todo.setdefault(signed_key(s), s)
    if not todo:
        return 0
    keep_states = isinstance(embedder, StatesEncoder) and store_token_states()
    stored = conn.execute(
        "SELECT key, states IS NOT NULL FROM gp_sentences WHERE tenant = %s AND key = ANY(%s)",
        (tenant, list(todo)),
    ).fetchall()
    stale: list[int] = []  # stored without the token states this ingest keeps: made again
    for key, has_states in stored:
        if has_states or not keep_states:
            todo.pop(int(key), None)
        else:
            stale.append(int(key))
    if not todo:
        return 0
    if stale:
        conn.execute(
            "DELETE FROM gp_sentences WHERE tenant = %s AND key = ANY(%s)", (tenant, stale)
        )
    texts = list(todo.values())
    states: list[States | None] = [None] * len(texts)
    if keep_states:
        assert isinstance(embedder, StatesEncoder)
        vectors, made = embedder.encode_with_states(texts)
        states = [m.states for m in made]
    else:
        vectors = embedder.encode(texts)
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.shape != (len(texts), embedder.dim) or len(states) != len(texts):
        raise IndexStoreError(f"sentence vectors of shape {vectors.shape}, not (n, {embedder.dim})")
    with conn.cursor().copy(_COPY) as copy:
        for key, v, st in zip(todo, vectors, states, strict=True):
            n = 0 if st is None else int(st.shape[0])
            blob = None if st is None else np.ascontiguousarray(st, dtype=np.float16).tobytes()
            copy.write_row((tenant, key, v.tobytes(), n, blob))
    return len(texts)


class PgSentences:
    """A tenant's stored evidence sentences in PostgreSQL (read-only, thread-safe)."""

    def __init__(self, pool: PgPool, tenant: str, embedder: str, dim: int) -> None:
        self._pool = pool
        self._tenant = tenant
        self._embedder = embedder
        self._dim = dim

    @property
    def embedder(self) -> str:
        return self._embedder

    def _rows(self, texts: Sequence[str], states: bool) -> list[tuple[Any, ...] | None]:
        """Each text's stored row (``(vector,)``, or ``(n_tokens, states)`` with ``states``;
        None where it has none), from one statement."""
        keys = [signed_key(t) for t in texts]
        if not keys:
            return []
        what = "key, n_tokens, states" if states else "key, vector"
        extra = " AND states IS NOT NULL" if states else ""
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {what} FROM gp_sentences WHERE tenant = %s AND key = ANY(%s){extra}",
                (self._tenant, list(dict.fromkeys(keys))),
            ).fetchall()
        found = {int(r[0]): tuple(r[1:]) for r in rows}
        return [found.get(k) for k in keys]

    def lookup(self, texts: Sequence[str]) -> list[Vector | None]:
        """The stored vector of each text (None where it has none)."""
        return [
            None if row is None else np.frombuffer(row[0], dtype=np.float32)
            for row in self._rows(texts, states=False)
        ]

    def token_states(self, texts: Sequence[str]) -> list[States | None]:
        """The stored token states of each text (None where it has none)."""
        return [
            None
            if row is None or not row[0]
            else np.frombuffer(row[1], dtype=np.float16).reshape(int(row[0]), self._dim)
            for row in self._rows(texts, states=True)
        ]
