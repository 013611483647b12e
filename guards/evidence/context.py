"""Evidence from the request itself ("closed domain"), and evidence selection per claim.

:func:`context_evidence` chunks the request's non-assistant messages into windows of
1–3 sentences (≤ ``MAX_CHARS``) that overlap by one sentence, so that any two adjacent
sentences share a window. ``doc`` is ``request:<role>#<message index>`` (the index is the
message's position in the sequence given, i.e. in the request's ``messages``), ``chunk``
is ``s<i>`` with ``i`` the window's first sentence, ``span`` is into that message's text.
Sentences come from :func:`guards.claims.sentences.fast_sentence_spans` (linear regex splitter):
pysbd costs ~35 ms per 2 kB of evidence against ~0.2 ms, and a request's context can be
long; answers (claims) still go through pysbd.

:func:`select_evidence` ranks candidates for each claim by cosine of embedder vectors,
or — when no vectors are given — by TF-IDF cosine fitted on claims + candidates.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Sequence

import numpy as np
import numpy.typing as npt

from groundproxy.errors import GuardTimeoutError
from groundproxy.guards.claims.sentences import Stop, fast_sentence_spans, trim_span
from groundproxy.guards.evidence.tfidf import cosine_matrix
from groundproxy.guards.types import Claim, Evidence

EXCLUDED_ROLES: frozenset[str] = frozenset({"assistant"})
MAX_SENTENCES = 3
MAX_CHARS = 600


_INSTRUCTION_START = re.compile(
    r"^\W*(?:please|tell|explain|describe|list|give|show|summari[sz]e|write|answer|compare|"
    r"(?:can|could|would|will) you)\b",
    re.IGNORECASE,
)


def not_evidence(sentence: str) -> bool:
    """Questions and instructions to the assistant assert nothing: never evidence."""
    return sentence.rstrip().endswith("?") or bool(_INSTRUCTION_START.match(sentence))


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
    # Questions and instructions are never evidence (not_evidence): they split the text into runs
    # of statements and each run is windowed on its own (sentence indices stay global).
    runs: list[list[tuple[int, tuple[int, int]]]] = [[]]
    index = 0
    for s, e in fast_sentence_spans(text):
        for piece in _hard_split(text, s, e) if e - s > MAX_CHARS else [(s, e)]:
            if not_evidence(text[piece[0] : piece[1]]):
                runs.append([])
            else:
                runs[-1].append((index, piece))
            index += 1
    windows: list[tuple[int, tuple[int, int]]] = []
    for run in runs:
        windows.extend((run[i][0], span) for i, span in _windows([p for _, p in run]))
    return windows


def _windows(sentences: list[tuple[int, int]]) -> list[tuple[int, tuple[int, int]]]:
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
    messages: Sequence[tuple[str, str]],
    exclude_roles: Collection[str] = EXCLUDED_ROLES,
    halt: Stop | None = None,
) -> list[Evidence]:
    """Sentence-window evidence from ``(role, text)`` messages.

    Every role but ``exclude_roles`` counts (system, developer, user, tool, function, or
    e.g. "context" for an eval row); assistant messages are skipped by default because
    earlier answers are not evidence. ``score`` is 0.0 here; :func:`select_evidence`
    fills it in. ``halt`` (true once the caller gave up) is checked before each message:
    GuardTimeoutError.
    """
    out: list[Evidence] = []
    for index, (role, text) in enumerate(messages):
        if halt is not None and halt():
            raise GuardTimeoutError("guard stopped at its deadline")
        if role in exclude_roles or not text or not text.strip():
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
        sims = (
            np.asarray(claim_vectors, dtype=np.float64)
            @ np.asarray(candidate_vectors, dtype=np.float64).T
        )
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


def refine_hits(hits: Sequence[Sequence[Evidence]]) -> list[Evidence]:
    """Cut retrieved index chunks into sentence windows (distinct, in first-seen order).

    A chunk can hold a whole section; the verifier reads best, and the citation quotes
    best, the window that can decide the claim. Spans stay offsets into the source
    document; doc, chunk id, hash and index version are the chunk's.
    """
    seen: set[tuple[str, str]] = set()
    out: list[Evidence] = []
    for per_claim in hits:
        for hit in per_claim:
            if (hit.doc, hit.chunk) in seen:
                continue
            seen.add((hit.doc, hit.chunk))
            for _, (s, e) in sentence_windows(hit.text):
                out.append(
                    dataclasses.replace(
                        hit, text=hit.text[s:e], span=(hit.span[0] + s, hit.span[0] + e)
                    )
                )
    return out
