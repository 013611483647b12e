"""Evidence from the request itself ("closed domain"), and evidence selection per claim.

:func:`context_evidence` chunks the request's system/user/tool messages into windows of
1–3 sentences (≤ ``MAX_CHARS``) that overlap by one sentence, so that any two adjacent
sentences share a window. ``doc`` is ``request:<role>#<message index>`` (the index is the
message's position in the sequence given, i.e. in the request's ``messages``), ``chunk``
is ``s<i>`` with ``i`` the window's first sentence, ``span`` is into that message's text.

:func:`select_evidence` ranks candidates for each claim by cosine of embedder vectors,
or — when no vectors are given — by TF-IDF cosine fitted on claims + candidates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

import numpy as np
import numpy.typing as npt

from guards.sentences import sentence_spans, trim_span
from guards.tfidf import cosine_matrix
from guards.types import Claim, Evidence

CONTEXT_ROLES: frozenset[str] = frozenset({"system", "developer", "user", "tool", "function"})
MAX_SENTENCES = 3
MAX_CHARS = 600


def _hard_split(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut an over-long sentence into ≤ MAX_CHARS pieces at whitespace."""
    pieces: list[tuple[int, int]] = []
    while end - start > MAX_CHARS:
        cut = text.rfind(" ", start + MAX_CHARS // 2, start + MAX_CHARS)
        if cut <= start:
            cut = start + MAX_CHARS
        s, e = trim_span(text, start, cut)
        if e > s:
            pieces.append((s, e))
        start = cut
    s, e = trim_span(text, start, end)
    if e > s:
        pieces.append((s, e))
    return pieces


def sentence_windows(text: str) -> list[tuple[int, tuple[int, int]]]:
    """(first sentence index, span) of each window of 1–3 sentences, ≤ MAX_CHARS."""
    sentences: list[tuple[int, int]] = []
    for s, e in sentence_spans(text):
        sentences.extend(_hard_split(text, s, e) if e - s > MAX_CHARS else [(s, e)])
    windows: list[tuple[int, tuple[int, int]]] = []
    i = 0
    while i < len(sentences):
        j = i + 1
        while (
            j < len(sentences)
            and j - i < MAX_SENTENCES
            and sentences[j][1] - sentences[i][0] <= MAX_CHARS
        ):
            j += 1
        windows.append((i, (sentences[i][0], sentences[j - 1][1])))
        if j >= len(sentences):
            break
        i = j - 1 if j - i > 1 else j  # overlap one sentence when the window has several
    return windows


def context_evidence(
    messages: Sequence[tuple[str, str]], roles: Collection[str] | None = CONTEXT_ROLES
) -> list[Evidence]:
    """Sentence-window evidence from ``(role, text)`` messages; ``roles=None`` keeps all.

    Assistant messages are skipped by default: earlier answers are not evidence.
    ``score`` is 0.0 here and filled in by :func:`select_evidence`.
    """
    out: list[Evidence] = []
    for index, (role, text) in enumerate(messages):
        if (roles is not None and role not in roles) or not text or not text.strip():
            continue
        for first, (s, e) in sentence_windows(text):
            out.append(
                Evidence(
                    text=text[s:e],
                    doc=f"request:{role}#{index}",
                    chunk=f"s{first}",
                    score=0.0,
                    span=(s, e),
                    source="request",
                )
            )
    return out


def similarity(
    claims: Sequence[Claim],
    claim_vectors: npt.NDArray[np.float32] | None,
    candidates: Sequence[Evidence],
    candidate_vectors: npt.NDArray[np.float32] | None,
) -> npt.NDArray[np.float64]:
    """``len(claims) × len(candidates)`` cosine matrix (vectors, else TF-IDF)."""
    if not claims or not candidates:
        return np.zeros((len(claims), len(candidates)), dtype=np.float64)
    if claim_vectors is not None and candidate_vectors is not None:
        sims = np.asarray(claim_vectors, dtype=np.float64) @ np.asarray(
            candidate_vectors, dtype=np.float64
        ).T
        return np.asarray(sims, dtype=np.float64)
    return cosine_matrix([c.text for c in claims], [e.text for e in candidates])


def select_evidence(
    claims: Sequence[Claim],
    claim_vectors: npt.NDArray[np.float32] | None,
    candidates: Sequence[Evidence],
    candidate_vectors: npt.NDArray[np.float32] | None,
    top_k: int,
    min_score: float,
) -> list[list[Evidence]]:
    """For each claim, the ``top_k`` candidates with cosine ≥ ``min_score``, best first.

    Each returned Evidence is a copy of the candidate with ``score`` set to the cosine.
    """
    sims = similarity(claims, claim_vectors, candidates, candidate_vectors)
    selected: list[list[Evidence]] = []
    for row in sims:
        order = np.argsort(-row, kind="stable")[: max(top_k, 0)]
        selected.append(
            [
                dataclasses.replace(candidates[int(j)], score=float(row[j]))
                for j in order
                if row[j] >= min_score
            ]
        )
    return selected
