"""What a tenant's adapter sees of one verified answer: per-claim and answer-level signals.

:func:`answer_signals` turns stage 1's output (:class:`~groundproxy.guards.verdict.stages.Verified`)
and the per-claim verdicts into plain numbers (JSON-safe); :mod:`guards.adapter.features`
aggregates them into the combiner's named features. Serving, ``calibrate --fit`` and
``bench/kshot.py`` all call this one function, so the adapter is fitted on exactly the
numbers it is applied to (the benchmark caches them on disk).

Per claim (:data:`CLAIM_FIELDS`): the decided P(supported), the verifier's best raw
P(supported) and P(contradicted) over the claim's passages, verdict flags, whether the
symbolic rules passed, the number of passages and their best retrieval score, the verdict's
uncertainty, the token-level alignment of the claim with its evidence (computed by the
caller from the embedder's token states), the upstream's token logprobs over the claim
(:mod:`guards.verdict.logprobs`, when the upstream sent them), and the lexical-overlap score (the
seed-001 TF-IDF method of :mod:`guards.verdict.lexical`, computed by
:mod:`guards.evidence.lexical_best`) of the claim against its own passages. Per answer: the trust
score and the same lexical score of the WHOLE answer against every passage the guard gathered (with
the question) — the lexical baseline, computed from the guard's own evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundproxy.guards.evidence.lexical_best import LexicalScorer
from groundproxy.guards.types import ClaimResult
from groundproxy.guards.verdict.decide import trust_score
from groundproxy.guards.verdict.stages import Verified

SIGNALS_VERSION = 3  # 2: the token alignment fields; 3: the logprob fields
CLAIM_FIELDS: tuple[str, ...] = (
    "p_supported",
    "raw_supported",
    "raw_contradicted",
    "supported",
    "contradicted",
    "unverifiable",
    "rule_failed",
    "n_evidence",
    "best_retrieval",
    "uncertainty",
    "lex_claim",
    "conflict",
    "correction",
    "mean_passage_supported",
    "claim_words",
    # token-level alignment of the claim with its evidence (models.token_alignment): mean and
    # min best-cosine of its content word pieces, share of pieces with no counterpart
    "tok_mean",
    "tok_min",
    "tok_low",
    # the upstream's token logprobs over the claim (guards.verdict.logprobs): mean and min; 0 when
    # the answer came without them (the answer's "logprobs" says which)
    "lp_mean",
    "lp_min",
)
# what the token fields read when the embedder gives no token states
NO_ALIGNMENT = (1.0, 1.0, 0.0)
NO_LOGPROBS = (0.0, 0.0)


def answer_signals(
    verified: Verified,
    results: Sequence[ClaimResult],
    alignment: Sequence[tuple[float, float, float]] | None = None,
    logprobs: Sequence[tuple[float, float]] | None = None,
) -> dict[str, Any]:
    """``{"claims": [[CLAIM_FIELDS…], …], "trust", "lex_answer", "lex_answer_alone" (without
    the question), "n_passages", "answer_words", "logprobs"}``. ``alignment``: each claim's
    token alignment (:mod:`groundproxy.models.token_alignment`), None → :data:`NO_ALIGNMENT`;
    ``logprobs``: each claim's ``(mean, min)`` upstream logprob (:func:`guards.verdict.logprobs.
    claim_logprobs`), None → :data:`NO_LOGPROBS` and ``"logprobs": 0``."""
    aligned = list(alignment) if alignment is not None else [NO_ALIGNMENT] * len(results)
    sure = list(logprobs) if logprobs is not None else [NO_LOGPROBS] * len(results)
    q = verified.question if verified.question and verified.question.strip() else None
    lexical = LexicalScorer()  # each text tokenized once (guards.evidence.lexical_best)
    claims: list[list[float]] = []
    passages: dict[str, None] = {}
    for s, r, tok, lp in zip(verified.claims, results, aligned, sure, strict=True):
        texts = [e.text for e in s.evidence]
        passages.update(dict.fromkeys(texts))
        claims.append(
            [
                r.probs.supported,
                max((p.supported for p in s.probs), default=0.0),
                max((p.contradicted for p in s.probs), default=0.0),
                float(r.verdict == "supported"),
                float(r.verdict == "contradicted"),
                float(r.verdict == "unverifiable"),
                float(not s.rule.ok),
                float(len(s.evidence)),
                max((e.score for e in s.evidence), default=0.0),
                r.probs.uncertainty(),  # the entropy (ClaimResult.uncertainty may be ranked)
                lexical.best(s.claim.text, texts, q),
                float(s.conflict is not None),
                float(s.correction_probs is not None),
                sum(p.supported for p in s.probs) / len(s.probs) if s.probs else 0.0,
                float(len(s.claim.text.split())),
                *tok,
                *lp,
            ]
        )
    return {
        "version": SIGNALS_VERSION,
        "claims": claims,
        "trust": trust_score(results),
        "lex_answer": lexical.best(verified.answer, list(passages), q),
        "lex_answer_alone": lexical.best(verified.answer, list(passages), None),
        "n_passages": len(passages),
        "answer_words": len(verified.answer.split()),
        "logprobs": int(logprobs is not None),
    }
