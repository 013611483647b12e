"""Stored token states of the evidence sentences: the token alignment's evidence, from ingest.

The token alignment of a claim with its evidence (:mod:`groundproxy.models.token_alignment`)
reads the embedder's last-layer token states of the evidence sentences. With request
context those come from the verifier's own pass over the sentences; index evidence is read
from the sentence vectors stored at ingest (:mod:`groundproxy.retrieval.sentence_vectors`),
so its sentences were never embedded at request time and the alignment had to embed them
again (~90 ms p50 per 5-claim answer on 2 cores against ~8 ms with stored states, same run,
``bench/signal_cost.py``). Ingest makes the token states in the same pass as the sentence
vectors and stores them beside them::

    gen-000007/sentences.token_offsets.npy   int64 (n + 1,): row i of sentences.keys.npy
                                             ↔ token_states[offsets[i]:offsets[i + 1]]
    gen-000007/sentences.token_states.npy    float16 (tokens, dim), unit vectors

A row with no tokens has none stored (a sentence of a generation written before this, or
with ``GROUNDPROXY_TOKEN_STATES=0``): the alignment embeds it live, and the next ingest
that meets the sentence again (a document added, changed, or deleted and added back)
embeds it with its states and replaces the row. Disk: 768 bytes per
word piece, ~21x the sentence vectors (32 MiB for the bench's 600 documents, against
1.5 MiB); ingest takes ~20 % longer. The states are memory-mapped read-only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundproxy.errors import IndexStoreError
from groundproxy.retrieval.fsutil import fsync_file

OFFSETS_FILE = "sentences.token_offsets.npy"
STATES_FILE = "sentences.token_states.npy"
States = npt.NDArray[np.float16]


def store_token_states() -> bool:
    """Does ingest store token states (``GROUNDPROXY_TOKEN_STATES``, default on; ``0`` off)?"""
    return os.environ.get("GROUNDPROXY_TOKEN_STATES", "1").strip().lower() not in {
        "0",
        "false",
        "no",
        "off",
    }


class StoredTokenStates:
    """A generation's token states, row-aligned with its sentence keys (read-only)."""

    def __init__(self, offsets: npt.NDArray[np.int64], states: States) -> None:
        self._offsets = offsets
        self._states = states

    @property
    def rows(self) -> int:
        return int(self._offsets.shape[0]) - 1

    @classmethod
    def load(cls, gen_dir: Path, rows: int, dim: int) -> StoredTokenStates | None:
        """The generation's states, or None when it has none."""
        if not (gen_dir / OFFSETS_FILE).exists():
            return None
        try:
            offsets = np.load(gen_dir / OFFSETS_FILE)
            states = np.load(gen_dir / STATES_FILE, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise IndexStoreError(f"cannot read the token states in {gen_dir}: {exc}") from exc
        if (
            offsets.shape != (rows + 1,)
            or offsets.dtype != np.int64
            or states.ndim != 2
            or states.shape[1] != dim
            or int(offsets[-1]) != states.shape[0]
            or bool((np.diff(offsets) < 0).any())
        ):
            raise IndexStoreError(f"the token states in {gen_dir} are inconsistent")
        return cls(offsets, states)

    def row(self, i: int) -> States | None:
        """Row ``i``'s states (a read-only view), None when it has none stored."""
        start, end = int(self._offsets[i]), int(self._offsets[i + 1])
        return self._states[start:end] if end > start else None


class TokenStateRows:
    """The token states of a writer's sentences, by row, until they are saved."""

    def __init__(self, base: StoredTokenStates | None, dim: int) -> None:
        self._base = base
        self._dim = dim
        self._new: list[States] = []

    def add(self, states: Sequence[States]) -> None:
        """States of the next new rows (in the order their keys were added)."""
        for s in states:
            if s.ndim != 2 or s.shape[1] != self._dim:
                raise IndexStoreError(f"token states of shape {s.shape}, not (n, {self._dim})")
            self._new.append(np.asarray(s, dtype=np.float16))

    def save(self, gen_dir: Path, picked: npt.NDArray[np.int64], new_rows: int) -> None:
        """Write the states of rows ``picked`` (indices into the new rows, then the base's)
        in that order; a base row without states, or any row of a base without any, stays
        empty. Streamed into a memory-mapped file: the base is never loaded whole."""
        if len(self._new) != new_rows:
            raise IndexStoreError(f"{len(self._new)} token states for {new_rows} new sentences")
        rows: list[States | None] = []
        for p in picked.tolist():
            if p < new_rows:
                rows.append(self._new[p])
            else:
                rows.append(self._base.row(p - new_rows) if self._base is not None else None)
        lengths = np.fromiter((0 if r is None else r.shape[0] for r in rows), dtype=np.int64)
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        if total == 0:  # numpy cannot map an empty file
            with (gen_dir / STATES_FILE).open("wb") as f:
                np.save(f, np.zeros((0, self._dim), dtype=np.float16))
        else:
            out = np.lib.format.open_memmap(
                gen_dir / STATES_FILE, mode="w+", dtype=np.float16, shape=(total, self._dim)
            )
            for r, start in zip(rows, offsets[:-1].tolist(), strict=True):
                if r is not None:
                    out[start : start + r.shape[0]] = r
            out.flush()
            del out
        fsync_file(gen_dir / STATES_FILE)
        with (gen_dir / OFFSETS_FILE).open("wb") as f:
            np.save(f, offsets)
        fsync_file(gen_dir / OFFSETS_FILE)
