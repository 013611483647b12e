"""Stored sentence vectors: the ``embedhead`` verifier's evidence sentences, embedded at ingest.

At request time the verifier embeds the claim and up to six sentences of every evidence
window (models.features). Those sentences come from the index's chunks, so ingest embeds
them once instead: for each chunk, the sentences :func:`retrieval.sentence_split.
evidence_sentences` gives for the chunk and for each of its sentence windows
(guards.evidence.context.sentence_windows, the evidence the guard hands the verifier). They are
stored next to the generation's index, keyed by a 64-bit hash of the exact text::

    gen-000007/sentences.keys.npy      uint64, sorted
    gen-000007/sentences.vectors.npy   float32 (n, dim), unit vectors, row i ↔ key i
    gen-000007/sentences.json          {"embedder", "dim", "count"}

plus, where ingest stored them, the sentences' token states
(:mod:`groundproxy.retrieval.sentence_tokens`); all written in the writer's private copy, so
they are published with the generation by its one atomic rename, and loaded read-only (the
vectors memory-mapped: workers share the pages).
Only an index built with the verifier's backbone (all-MiniLM-L6-v2) gets them; a sentence
not found (request context, an index without the files) is embedded live by the verifier.
The Postgres backend keeps its own (:mod:`groundproxy.retrieval.pg_sentences`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from groundproxy.errors import IndexStoreError
from groundproxy.guards.evidence.context import sentence_windows
from groundproxy.retrieval.fsutil import fsync_file, write_durable
from groundproxy.retrieval.minilm import MINILM_DIM, MINILM_NAME
from groundproxy.retrieval.sentence_split import evidence_sentences
from groundproxy.retrieval.sentence_tokens import StoredTokenStates, TokenStateRows
from groundproxy.retrieval.token_states import TokenStates

KEYS_FILE = "sentences.keys.npy"
VECTORS_FILE = "sentences.vectors.npy"
INFO_FILE = "sentences.json"
FILES = (KEYS_FILE, VECTORS_FILE, INFO_FILE)
Vectors = npt.NDArray[np.float32]
States = npt.NDArray[np.float16]
EncodeStates = Callable[[list[str]], tuple[Vectors, Sequence[TokenStates]]]


@runtime_checkable
class StatesEncoder(Protocol):
    """An embedder that gives the token states of the pass that made the vectors (the ONNX
    MiniLM one: retrieval.onnx_embedder)."""

    def encode_with_states(self, texts: Sequence[str]) -> tuple[Vectors, list[TokenStates]]: ...


def sentence_key(text: str) -> int:
    """The 64-bit key of one sentence (blake2b of its UTF-8 text)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def _keys(texts: Iterable[str]) -> npt.NDArray[np.uint64]:
    return np.fromiter((sentence_key(t) for t in texts), dtype=np.uint64)


def chunk_sentences(chunk: str) -> list[str]:
    """Every sentence the verifier can be given from ``chunk`` (distinct, in order)."""
    out = dict.fromkeys(evidence_sentences(chunk))
    for _, (s, e) in sentence_windows(chunk):
        out.update(dict.fromkeys(evidence_sentences(chunk[s:e])))
    return list(out)


def stores_sentences(embedder_name: str, dim: int) -> bool:
    """Are an index's vectors the verifier's backbone's (so its sentences are stored)?"""
    return embedder_name == MINILM_NAME and dim == MINILM_DIM


class StoredSentenceVectors:
    """A generation's stored sentence vectors (read-only); the guard's ``SentenceVectors``."""

    def __init__(
        self,
        embedder: str,
        keys: npt.NDArray[np.uint64],
        vectors: Vectors,
        tokens: StoredTokenStates | None = None,
    ) -> None:
        self.embedder = embedder
        self._keys = keys
        self._vectors = vectors
        self.tokens = tokens

    @property
    def count(self) -> int:
        return int(self._keys.shape[0])

    @classmethod
    def load(cls, gen_dir: Path) -> StoredSentenceVectors | None:
        """The generation's vectors, or None when it has none (or they do not match)."""
        if not (gen_dir / INFO_FILE).exists():
            return None
        try:
            info = json.loads((gen_dir / INFO_FILE).read_text(encoding="utf-8"))
            keys = np.load(gen_dir / KEYS_FILE)
            vectors = np.load(gen_dir / VECTORS_FILE, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise IndexStoreError(f"cannot read the sentence vectors in {gen_dir}: {exc}") from exc
        n, dim = int(info.get("count", -1)), int(info.get("dim", -1))
        if keys.shape != (n,) or vectors.shape != (n, dim) or keys.dtype != np.uint64:
            raise IndexStoreError(f"the sentence vectors in {gen_dir} are inconsistent")
        tokens = StoredTokenStates.load(gen_dir, n, dim)
        return cls(str(info.get("embedder", "")), keys, vectors, tokens)

    def _rows(self, texts: Sequence[str]) -> list[int | None]:
        """The row of each text (None where it has none)."""
        if not texts or self.count == 0:
            return [None] * len(texts)
        wanted = _keys(texts)
        pos = np.minimum(np.searchsorted(self._keys, wanted), self.count - 1)
        found = self._keys[pos] == wanted
        return [int(p) if ok else None for p, ok in zip(pos, found, strict=True)]

    def lookup(self, texts: Sequence[str]) -> list[Vectors | None]:
        """The stored vector of each text (None where it has none)."""
        return [
            None if r is None else np.asarray(self._vectors[r], dtype=np.float32)
            for r in self._rows(texts)
        ]

    def token_states(self, texts: Sequence[str]) -> list[States | None]:
        """The stored token states of each text (None where it has none)."""
        if self.tokens is None:
            return [None] * len(texts)
        tokens = self.tokens
        return [None if r is None else tokens.row(r) for r in self._rows(texts)]


class SentenceVectorWriter:
    """Collects the sentence vectors of a writer's new chunks; saves the merged set."""

    def __init__(
        self,
        embedder: str,
        dim: int,
        base: StoredSentenceVectors | None,
        *,
        token_states: bool = False,
    ) -> None:
        self.embedder = embedder
        self.dim = dim
        self._base = base if base is not None and base.embedder == embedder else None
        # the sentences' token states too (retrieval.sentence_tokens), made in the same pass
        base_tokens = self._base.tokens if self._base is not None else None
        self._tokens = TokenStateRows(base_tokens, dim) if token_states else None
        self._known: set[int] = set()
        self._new_keys: list[npt.NDArray[np.uint64]] = []
        self._new_vectors: list[Vectors] = []
        self.embedded = 0

    def add(
        self,
        chunks: Sequence[str],
        encode: Callable[[list[str]], Vectors],
        encode_states: EncodeStates | None = None,
    ) -> None:
        """Embed (one ``encode`` call, or one ``encode_states`` call when this writer keeps
        token states) the sentences of ``chunks`` not stored yet."""
        todo: dict[int, str] = {}
        for chunk in chunks:
            for s in chunk_sentences(chunk):
                k = sentence_key(s)
                if k not in self._known and k not in todo:
                    todo[k] = s
        if self._base is not None and todo:
            base, keep_states = self._base, self._tokens is not None
            # keeping token states: a stored sentence without them (a generation written
            # before, or with them off) is embedded again and replaces its old row
            todo = {
                k: s
                for (k, s), row in zip(todo.items(), base._rows(list(todo.values())), strict=True)
                if row is None
                or (keep_states and (base.tokens is None or base.tokens.row(row) is None))
            }
        if not todo:
            return
        states: Sequence[TokenStates] = ()
        if self._tokens is not None:
            if encode_states is None:
                raise IndexStoreError("this writer keeps token states: give encode_states")
            made, states = encode_states(list(todo.values()))
        else:
            made = encode(list(todo.values()))
        vectors = np.asarray(made, dtype=np.float32)
        if vectors.shape != (len(todo), self.dim):
            raise IndexStoreError(f"sentence vectors of shape {vectors.shape}, not (n, {self.dim})")
        if self._tokens is not None:
            if len(states) != len(todo):
                raise IndexStoreError(f"{len(states)} token states for {len(todo)} sentences")
            self._tokens.add([t.states for t in states])
        self._known.update(todo)
        self._new_keys.append(np.fromiter(todo, dtype=np.uint64))
        self._new_vectors.append(vectors)
        self.embedded += len(todo)

    def save(self, gen_dir: Path) -> None:
        """Write the new vectors plus the base's (sorted, distinct; a key in both keeps its
        new row) into ``gen_dir``.

        Sentences of deleted chunks stay (harmless: found only by their exact text)."""
        keys = [self._base._keys] if self._base is not None else []
        vecs = [np.asarray(self._base._vectors)] if self._base is not None else []
        all_keys = np.concatenate([*self._new_keys, *keys]).astype(np.uint64)
        all_vecs = np.concatenate([*self._new_vectors, *vecs]).astype(np.float32)
        all_vecs = all_vecs.reshape(len(all_keys), self.dim)
        all_keys, first = np.unique(all_keys, return_index=True)  # sorted, first = new
        for name, array in ((KEYS_FILE, all_keys), (VECTORS_FILE, all_vecs[first])):
            with (gen_dir / name).open("wb") as f:
                np.save(f, array)
            fsync_file(gen_dir / name)
        if self._tokens is not None:
            self._tokens.save(gen_dir, first.astype(np.int64), self.embedded)
        info = {"embedder": self.embedder, "dim": self.dim, "count": len(all_keys)}
        write_durable(gen_dir / INFO_FILE, json.dumps(info).encode("utf-8"))
