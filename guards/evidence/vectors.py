"""Vectors of one request's evidence sentences: found where they already are, else embedded
in slices, most important first.

The request-context path (:mod:`guards.evidence.request_evidence`) asks for the vectors of the
sentences of the passages it keeps, in priority order. :class:`RequestVectors` answers from
what this request already has, then from its ``source`` (a tenant's cache of passages seen
before and the tenant index's sentences stored at ingest: :mod:`retrieval.context_cache`),
and embeds the rest in slices of at most :data:`SLICE_CHARS` characters with ``halt``
checked between them — a request given up stops within one slice (~15 ms on 2 cores) — and
stops making new vectors once ``until`` (the budget less what the rest of the guard needs)
or ``max_chars`` would be passed: the passages left without vectors are then simply not
verified against (reported: "verified on the top-N passages").

The verifier reads the same object (it is the evidence's ``sentences``, a
:class:`guards.types.SentenceVectors`): a sentence embedded here is not embedded again.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from groundproxy.errors import GuardTimeoutError
from groundproxy.guards.claims.sentences import Stop
from groundproxy.guards.types import Embedder

Vector = npt.NDArray[np.float32]
# One embedder call per slice: ~65 word pieces, ~15 ms of fp32 MiniLM on 2 quiet cores — the
# most a given-up request runs on, and the longest another tenant's guard shares the cores
# with this one's before it waits its turn (proxy.serving.cpu_share: 700 characters were
# ~100 ms on 2 busy cores, and a small tenant's guard ran beside them); still large enough to
# batch well (ONNX run overhead ~8 word pieces per call, retrieval.onnx_embedder).
SLICE_CHARS = 300
# Before any slice is timed, the cost assumed per character (fp32 MiniLM, 2 busy cores).
FIRST_S_PER_CHAR = 1e-4
EWMA_ALPHA = 0.2


class VectorSource(Protocol):
    """Where vectors made before may be (a tenant's cache, its index's stored sentences)."""

    def find(self, texts: Sequence[str]) -> list[Vector | None]: ...

    def keep(self, texts: Sequence[str], vectors: npt.NDArray[np.float32]) -> None: ...


@dataclass
class Counts:
    """Where one request's sentence vectors came from."""

    found: int = 0  # cache or index
    embedded: int = 0
    embedded_chars: int = 0
    stopped: bool = False  # ``until`` or ``max_chars`` left sentences without vectors
    out_of_time: bool = False  # ``until`` (not ``max_chars``) did


class _Pace:
    """Recent embedder seconds per character (shared by the requests of a process)."""

    def __init__(self) -> None:
        self.s_per_char = FIRST_S_PER_CHAR
        self._lock = threading.Lock()

    def observe(self, seconds: float, chars: int) -> None:
        if chars <= 0:
            return
        with self._lock:
            self.s_per_char += EWMA_ALPHA * (seconds / chars - self.s_per_char)


PACE = _Pace()


class RequestVectors:
    """One request's evidence-sentence vectors (see the module docstring)."""

    def __init__(self, embedder: Embedder, source: VectorSource | None = None) -> None:
        self._embedder = embedder
        self._source = source
        self._have: dict[str, Vector] = {}
        self.counts = Counts()

    @property
    def embedder(self) -> str:
        """The name of the model that made the vectors (guards.types.SentenceVectors)."""
        return self._embedder.name

    def lookup(self, texts: Sequence[str]) -> list[Vector | None]:
        """The vector of each text this request has (None where it has none)."""
        return [self._have.get(t) for t in texts]

    def has(self, text: str) -> bool:
        return text in self._have

    def fill(
        self,
        texts: Sequence[str],
        *,
        halt: Stop | None = None,
        until: float | None = None,
        max_chars: int | None = None,
    ) -> None:
        """Vectors for ``texts`` (priority order): found ones first, the rest embedded slice
        by slice until done, ``until`` (time.monotonic) would pass during the next slice, or
        ``max_chars`` characters were embedded. ``halt`` raises GuardTimeoutError."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._have]
        if todo and self._source is not None:
            found = self._source.find(todo)
            for t, v in zip(todo, found, strict=True):
                if v is not None:
                    self._have[t] = v
                    self.counts.found += 1
            todo = [t for t in todo if t not in self._have]
        at = 0
        while at < len(todo):
            if halt is not None and halt():
                raise GuardTimeoutError("guard stopped at its deadline")
            capped = math.inf  # the hard limits: max_chars, then the budget's reserve
            if max_chars is not None:
                capped = float(max_chars - self.counts.embedded_chars)
            limit = capped
            if until is not None:
                limit = min(limit, (until - time.monotonic()) / PACE.s_per_char)
            piece = _slice(todo, at, SLICE_CHARS, limit)
            if not piece:  # the cap or the budget's reserve: the rest stays without vectors
                self.counts.stopped = True
                self.counts.out_of_time = bool(_slice(todo, at, SLICE_CHARS, capped))
                return
            chars = sum(len(t) for t in piece)
            began = time.perf_counter()
            made = np.asarray(self._embedder.encode(piece), dtype=np.float32)
            PACE.observe(time.perf_counter() - began, chars)
            for t, v in zip(piece, made, strict=True):
                self._have[t] = v
            if self._source is not None:
                self._source.keep(piece, made)
            self.counts.embedded += len(piece)
            self.counts.embedded_chars += chars
            at += len(piece)


def encode_sliced(
    embedder: Embedder, texts: Sequence[str], halt: Stop | None = None
) -> npt.NDArray[np.float32]:
    """``embedder.encode(texts)`` in slices of ≤ SLICE_CHARS, ``halt`` checked between them
    (a long answer's claims: a given-up request stops within one slice)."""
    items = list(texts)
    if halt is None or sum(len(t) for t in items) <= SLICE_CHARS:
        return np.asarray(embedder.encode(items), dtype=np.float32)
    parts: list[npt.NDArray[np.float32]] = []
    at = 0
    while at < len(items):
        if halt():
            raise GuardTimeoutError("guard stopped at its deadline")
        piece = _slice(items, at, SLICE_CHARS)
        parts.append(np.asarray(embedder.encode(piece), dtype=np.float32))
        at += len(piece)
    return np.concatenate(parts)


def _slice(todo: Sequence[str], at: int, size: int, limit: float = math.inf) -> list[str]:
    """The texts from ``at`` on for one embedder call: about ``size`` characters — a text
    longer than ``size`` makes a slice alone (a 400-character sentence is still evidence) —
    and never past ``limit`` characters in all (the cap or the time left: a hard stop)."""
    out: list[str] = []
    total = 0
    for t in todo[at:]:
        if total + len(t) > limit or (out and total + len(t) > size):
            break
        out.append(t)
        total += len(t)
    return out
