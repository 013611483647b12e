"""Evidence text for the ``embedhead`` features (models.features) and the cross-encoder
windows (models.ce_window): sentences, words, content words, and the lexical pre-ranking
that keeps at most ``MAX_CANDIDATES`` evidence sentences per claim."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

MAX_CANDIDATES = 6
MAX_SENTENCE_CHARS = 400
MAX_CLAIM_CHARS = 1200

_SPLIT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)]))\s+(?=[\"'“‘(\[]?[A-Z0-9])|\s*\n\s*")
_ABBREV = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Gen|Col|Sgt|Lt|Capt|Gov|Sen|Rep|Rev|Inc|Co|Corp|Ltd|"
    r"No|vs|etc|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)|\b[A-Z])\.$"
)
_ALNUM = re.compile(r"\w")
_WORD = re.compile(r"[A-Za-z0-9]+(?:[.,'][A-Za-z0-9]+)*")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "at",
        "by",
        "for",
        "with",
        "about",
        "against",
        "between",
        "into",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
        "to",
        "from",
        "up",
        "down",
        "in",
        "out",
        "on",
        "off",
        "over",
        "under",
        "again",
        "further",
        "then",
        "once",
        "here",
        "there",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "such",
        "only",
        "own",
        "same",
        "so",
        "than",
        "too",
        "very",
        "s",
        "t",
        "can",
        "will",
        "just",
        "should",
        "now",
        "i",
        "me",
        "my",
        "myself",
        "we",
        "our",
        "ours",
        "ourselves",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "he",
        "him",
        "his",
        "himself",
        "she",
        "her",
        "hers",
        "herself",
        "it",
        "its",
        "itself",
        "they",
        "them",
        "their",
        "theirs",
        "themselves",
        "what",
        "which",
        "who",
        "whom",
        "this",
        "that",
        "these",
        "those",
        "am",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "have",
        "has",
        "had",
        "having",
        "do",
        "does",
        "did",
        "doing",
        "would",
        "could",
        "also",
        "as",
        "it's",
        "i'm",
        "yes",
        "well",
        "oh",
        "really",
        "like",
        "know",
        "think",
        "one",
    ]
)


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


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS]


def clip_claim(claim: str) -> str:
    """The claim text that is embedded and featurized (bounded length)."""
    claim = " ".join(claim.split())
    return claim[:MAX_CLAIM_CHARS] if claim else claim


def candidate_sentences(claim: str, sentences: Sequence[str]) -> list[str]:
    """The ≤ ``MAX_CANDIDATES`` evidence sentences sharing most (IDF-weighted) claim words.

    IDF is local to ``sentences``; ties keep document order. The chosen sentences are
    returned in document order.
    """
    if len(sentences) <= MAX_CANDIDATES:
        return list(sentences)
    claim_words = set(content_words(claim))
    bags = [set(content_words(s)) for s in sentences]
    n = len(sentences)
    df: dict[str, int] = {}
    for bag in bags:
        for w in bag & claim_words:
            df[w] = df.get(w, 0) + 1
    scores = []
    for i, bag in enumerate(bags):
        hit = bag & claim_words
        s = sum(math.log(1.0 + n / df[w]) for w in hit)
        scores.append((-s, i))
    keep = sorted(i for _, i in sorted(scores)[:MAX_CANDIDATES])
    return [sentences[i] for i in keep]


def evidence_candidates(claim: str, evidence: str) -> tuple[list[str], int]:
    """Candidate evidence sentences for ``claim`` and the evidence's sentence count."""
    sentences = split_sentences(evidence)
    if not sentences and evidence.strip():
        sentences = [evidence.strip()[:MAX_SENTENCE_CHARS]]
    return candidate_sentences(claim, sentences), len(sentences)
