"""Evidence window of the cross-encoder: the SAME selection at training and at inference.

A cross-encoder reads one (claim, evidence) pair of at most ``MAX_LENGTH`` tokens, claim
first. A long evidence (a whole context) does not fit, so the evidence sentences that
best match the claim are kept:

1. the evidence is cut into sentences and at most ``MAX_CANDIDATES`` are pre-selected by
   :func:`models.features.evidence_candidates` (IDF-weighted recall of the claim's content
   words, the routine of the embedhead features);
2. the candidates are taken best first (same IDF-weighted score, ties → document order)
   while they fit the token budget left after the claim;
3. the kept sentences are joined in document order.

:func:`select_evidence` is pure (the token counter is passed in); :func:`pair_texts` is
what a caller holding a Hugging Face tokenizer uses, at training and at inference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from groundproxy.models.features import clip_claim, content_words, evidence_candidates

MAX_LENGTH = 128
MIN_EVIDENCE_TOKENS = 48  # the claim is cut so the evidence keeps at least this many
SPECIAL_TOKENS = 3  # [CLS] claim [SEP] evidence [SEP]

CountTokens = Callable[[str], int]


def rank_candidates(claim: str, candidates: Sequence[str]) -> list[int]:
    """Indices of ``candidates``, best match first (IDF-weighted claim-word recall)."""
    claim_words = set(content_words(claim))
    bags = [set(content_words(s)) & claim_words for s in candidates]
    n = len(candidates)
    df: dict[str, int] = {}
    for bag in bags:
        for w in bag:
            df[w] = df.get(w, 0) + 1
    scores = [sum(math.log(1.0 + n / df[w]) for w in bag) for bag in bags]
    return sorted(range(n), key=lambda i: (-scores[i], i))


def claim_budget(n_claim_tokens: int, max_length: int = MAX_LENGTH) -> int:
    """Tokens the claim may use: all it has, leaving ``MIN_EVIDENCE_TOKENS`` to evidence."""
    return min(n_claim_tokens, max_length - SPECIAL_TOKENS - MIN_EVIDENCE_TOKENS)


def select_evidence(claim: str, evidence: str, count_tokens: CountTokens, budget: int) -> str:
    """The best-matching evidence sentences fitting ``budget`` tokens, in document order.

    If not even the best sentence fits, it is returned alone (the tokenizer truncates it).
    """
    candidates, _ = evidence_candidates(claim, evidence)
    if not candidates:
        return evidence.strip()
    kept: list[int] = []
    used = 0
    for i in rank_candidates(claim, candidates):
        n = count_tokens(candidates[i])
        if used + n <= budget:
            kept.append(i)
            used += n
    if not kept:
        kept = [rank_candidates(claim, candidates)[0]]
    return " ".join(candidates[i] for i in sorted(kept))


def pair_texts(
    tokenizer: Any, pairs: Sequence[tuple[str, str]], max_length: int = MAX_LENGTH
) -> list[tuple[str, str]]:
    """(claim, evidence window) texts for ``(claim, evidence)`` pairs, to tokenize as a pair.

    Tokenize the result with ``truncation=True, max_length=max_length``: the claim is
    long only if it exceeds :func:`claim_budget`, and then it is the part truncated.
    """

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    out: list[tuple[str, str]] = []
    for claim, evidence in pairs:
        c = clip_claim(claim) or "."
        budget = max_length - SPECIAL_TOKENS - claim_budget(count(c), max_length)
        out.append((c, select_evidence(c, evidence, count, budget)))
    return out


def encode(
    tokenizer: Any, pairs: Sequence[tuple[str, str]], max_length: int = MAX_LENGTH
) -> dict[str, list[list[int]]]:
    """Token ids of the windowed pairs (no padding), claim truncated first if too long."""
    texts = pair_texts(tokenizer, pairs, max_length)
    enc = tokenizer(
        [c for c, _ in texts],
        [e for _, e in texts],
        truncation="longest_first",
        max_length=max_length,
    )
    return {k: list(v) for k, v in enc.items()}
