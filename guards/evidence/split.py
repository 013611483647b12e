"""The sentence splitter of the ``embedhead`` verifier's evidence (models.evidence_text).

One splitter for three readers: ingest stores the vectors of exactly the sentences it gives
(retrieval.sentence_vectors), the guard embeds exactly those of the request-context passages
it keeps (guards.evidence.request_evidence), and the verifier then finds them all by their text
instead of embedding them again. It lives in ``guards`` (pure, imports nothing) so all three
can import it; :mod:`groundproxy.retrieval.sentence_split` re-exports it.
"""

from __future__ import annotations

import re

MAX_SENTENCE_CHARS = 400

_SPLIT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)]))\s+(?=[\"'“‘(\[]?[A-Z0-9])|\s*\n\s*")
_ABBREV = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Gen|Col|Sgt|Lt|Capt|Gov|Sen|Rep|Rev|Inc|Co|Corp|Ltd|"
    r"No|vs|etc|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)|\b[A-Z])\.$"
)
_ALNUM = re.compile(r"\w")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (regex on end punctuation + capital, and on newlines).

    Over-long sentences are cut at whitespace into pieces of ≤ ``MAX_SENTENCE_CHARS``;
    pieces without a letter or digit are dropped.
    """
    merged: list[str] = []
    for raw in _SPLIT.split(text):
        if merged and _ABBREV.search(merged[-1]):
            merged[-1] = merged[-1] + " " + raw.strip()
        else:
            merged.append(raw.strip())
    out: list[str] = []
    for piece in merged:
        while len(piece) > MAX_SENTENCE_CHARS:
            cut = piece.rfind(" ", MAX_SENTENCE_CHARS // 2, MAX_SENTENCE_CHARS)
            if cut <= 0:
                cut = MAX_SENTENCE_CHARS
            head, piece = piece[:cut].strip(), piece[cut:].strip()
            if _ALNUM.search(head):
                out.append(head)
        if piece and _ALNUM.search(piece):
            out.append(piece)
    return out


def evidence_sentences(evidence: str) -> list[str]:
    """The sentences of one evidence passage as the verifier reads them (a passage without
    a sentence boundary is one clipped sentence)."""
    sentences = split_sentences(evidence)
    if not sentences and evidence.strip():
        sentences = [evidence.strip()[:MAX_SENTENCE_CHARS]]
    return sentences
