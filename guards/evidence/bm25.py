"""Okapi BM25 over a request's context passages: the cheap, linear first look per claim.

A request may carry thousands of context passages (RAG: the retrieved chunks in a system
or user message). Embedding all of them cost ~0.4 ms per word piece on 2 cores (a
2,000-word context: ~700 ms, past most budgets); BM25 reads each passage's words once
(:class:`Bm25Index`, linear in the context) and scores every claim against the postings of
its own terms only, so the embedder sees the few passages each claim can be about
(:mod:`guards.evidence.request_evidence`).

Terms are lower-cased alphanumeric words minus English stop words; BM25 with the usual
``k1 = 1.2``, ``b = 0.75`` and the non-negative idf ``ln(1 + (N − df + 0.5) / (df + 0.5))``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from groundproxy.errors import GuardTimeoutError
from groundproxy.guards.claims.sentences import Stop

K1 = 1.2
B = 0.75
HALT_EVERY = 256
_TERM = re.compile(r"[a-z0-9]+")
_STOP = frozenset(ENGLISH_STOP_WORDS)


def terms(text: str) -> list[str]:
    """The BM25 terms of ``text`` (lower-case words and numbers, stop words dropped)."""
    return [t for t in _TERM.findall(text.lower()) if t not in _STOP]


class Bm25Index:
    """Postings of a list of passages, built once per request with array operations (the
    words of each passage are read by one regex call; no Python loop per posting)."""

    def __init__(self, passages: Sequence[str], halt: Stop | None = None) -> None:
        """``halt`` (true once the caller gave up) is checked every :data:`HALT_EVERY`
        passages: GuardTimeoutError."""
        self.n = len(passages)
        words: list[str] = []
        lengths = np.zeros(self.n, dtype=np.int64)
        for i, text in enumerate(passages):
            if halt is not None and i % HALT_EVERY == 0 and halt():
                raise GuardTimeoutError("guard stopped at its deadline")
            found = _TERM.findall(text.lower())
            lengths[i] = len(found)
            words += found
        self._vocab: dict[str, int] = {w: k for k, w in enumerate(dict.fromkeys(words))}
        ids = np.fromiter(map(self._vocab.__getitem__, words), dtype=np.int64, count=len(words))
        rows = np.repeat(np.arange(self.n, dtype=np.int64), lengths)
        stop = np.zeros(len(self._vocab), dtype=bool)
        stop[[k for w, k in self._vocab.items() if w in _STOP]] = True
        keep = ~stop[ids]
        ids, rows = ids[keep], rows[keep]
        size = np.bincount(rows, minlength=self.n).astype(np.float64)
        mean = float(size.mean()) if self.n else 0.0
        # the length part of BM25's denominator, per passage
        self._norm = K1 * (1.0 - B + B * size / mean) if mean > 0 else np.full(self.n, K1)
        keys, tf = np.unique(ids * max(self.n, 1) + rows, return_counts=True)  # sorted by term
        self._term = keys // max(self.n, 1)
        self._rows = keys % max(self.n, 1)
        self._tf = tf.astype(np.float64)
        self._start = np.searchsorted(self._term, np.arange(len(self._vocab) + 1))

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        """BM25 of ``query`` against every passage (0 where no term is shared)."""
        out = np.zeros(self.n, dtype=np.float64)
        for term in set(terms(query)):
            k = self._vocab.get(term)
            if k is None:
                continue
            a, b = int(self._start[k]), int(self._start[k + 1])
            df = b - a
            if df == 0:  # a stop word
                continue
            idf = math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
            tf = self._tf[a:b]
            at = self._rows[a:b]
            out[at] += idf * tf * (K1 + 1.0) / (tf + self._norm[at])
        return out
