"""Evidence text for the ``embedhead`` features (models.features) and the cross-encoder
windows (models.ce_window): sentences, words, content words, and the lexical pre-ranking
that keeps at most ``MAX_CANDIDATES`` evidence sentences per claim. The sentence splitter
itself lives in :mod:`retrieval.sentence_split` (ingest stores the vectors of the very
sentences it gives; re-exported here)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from groundproxy.retrieval.sentence_split import (
    MAX_SENTENCE_CHARS,
    evidence_sentences,
    split_sentences,
)

MAX_CANDIDATES = 6
MAX_CLAIM_CHARS = 1200

__all__ = [
    "MAX_CANDIDATES",
    "MAX_CLAIM_CHARS",
    "MAX_SENTENCE_CHARS",
    "STOPWORDS",
    "candidate_sentences",
    "clip_claim",
    "content_words",
    "evidence_candidates",
    "evidence_sentences",
    "split_sentences",
    "words",
]

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
    sentences = evidence_sentences(evidence)
    return candidate_sentences(claim, sentences), len(sentences)
