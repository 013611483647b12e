"""The adapter's named answer-level features, aggregated from :mod:`guards.adapter.signals`.

Every feature has a name; an adapter file lists the names it was fitted on and the serve
path computes them by name (:func:`features_from_signals`), so a file written by an older
version (:data:`LEGACY_FEATURES`, the first adapter format) keeps working, and a file that
names a feature this version does not know is refused with a clear error
(:class:`~groundproxy.guards.adapter.combiner.Adapter`).

An answer with no claims has P(supported) 1 and no contradiction (as the trust score says).
The logprob features (:data:`LOGPROB_FEATURES`) are NaN for an answer that came without
the upstream's logprobs: the fit imputes them (:func:`impute_missing`) and an adapter reads
a NaN as its fitted mean, so it weighs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from groundproxy.guards.adapter.signals import (
    CLAIM_FIELDS,
    NO_ALIGNMENT,
    NO_LOGPROBS,
    answer_signals,
)
from groundproxy.guards.types import ClaimResult
from groundproxy.guards.verdict.stages import Verified

# The first adapter format's features (adapter files fitted before the signals existed).
LEGACY_FEATURES: tuple[str, ...] = (
    "n_claims_log",
    "no_claims",
    "min_p_supported",
    "mean_p_supported",
    "min_raw_supported",
    "mean_raw_supported",
    "max_p_contradicted",
    "mean_p_contradicted",
    "share_supported",
    "share_contradicted",
    "share_unverifiable",
    "share_rule_failed",
    "share_no_evidence",
    "max_uncertainty",
    "min_retrieval",
    "mean_retrieval",
    "trust",
)
# Added with the signals: the lexical-overlap scores (answer and claims against the guard's
# own evidence), more retrieval and per-claim aggregates.
EXTRA_FEATURES: tuple[str, ...] = (
    "all_supported",  # the zero-shot decision: every claim supported (1) or not (0)
    "max_p_supported",
    "min_passage_supported",
    "mean_passage_supported",
    "max_retrieval",
    "mean_n_evidence_log",
    "n_passages_log",
    "share_conflict",
    "share_corrected",
    "lex_answer",
    "lex_answer_alone",
    "min_lex_claim",
    "mean_lex_claim",
    "answer_words_log",
    "mean_claim_words_log",
)
# Added with signals version 2: the token-level alignment of claims with their evidence
# (models.token_alignment; computed only when an adapter in force names one of these).
TOKEN_FEATURES: tuple[str, ...] = (
    "min_tok_mean",
    "mean_tok_mean",
    "min_tok_min",
    "mean_tok_low",
    "max_tok_low",
)
# Added with signals version 3: the upstream's token logprobs over each claim
# (guards.verdict.logprobs; present only when the upstream sent them, NaN otherwise).
LOGPROB_FEATURES: tuple[str, ...] = ("min_lp_mean", "mean_lp_mean", "min_lp_min")
FEATURES: tuple[str, ...] = LEGACY_FEATURES + EXTRA_FEATURES + TOKEN_FEATURES + LOGPROB_FEATURES
# The named subsets ``calibrate --fit`` chooses from by cross-fitting on the tenant's labels
# (the logprob ones only when enough of the labelled answers carried logprobs: LOGPROB_SETS).
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "all": LEGACY_FEATURES + EXTRA_FEATURES + TOKEN_FEATURES,
    "legacy": LEGACY_FEATURES,
    "compact": (
        "all_supported",
        "n_claims_log",
        "min_p_supported",
        "mean_p_supported",
        "max_p_contradicted",
        "share_rule_failed",
        "share_no_evidence",
        "mean_retrieval",
        "trust",
        "lex_answer",
        "mean_lex_claim",
        "answer_words_log",
    ),
}
FEATURE_SETS["compact_tok"] = FEATURE_SETS["compact"] + TOKEN_FEATURES
LOGPROB_SETS: dict[str, tuple[str, ...]] = {
    "compact_lp": FEATURE_SETS["compact"] + LOGPROB_FEATURES,
    "compact_tok_lp": FEATURE_SETS["compact_tok"] + LOGPROB_FEATURES,
}

_COL = {name: i for i, name in enumerate(CLAIM_FIELDS)}
# what an older row (without the token or logprob fields) reads for them
_TOKEN_DEFAULT = {
    **dict(zip(("tok_mean", "tok_min", "tok_low"), NO_ALIGNMENT, strict=True)),
    **dict(zip(("lp_mean", "lp_min"), NO_LOGPROBS, strict=True)),
}


def _mean(xs: Sequence[float], empty: float) -> float:
    return sum(xs) / len(xs) if xs else empty


def features_from_signals(signals: Mapping[str, Any]) -> dict[str, float]:
    """Every feature of :data:`FEATURES`, by name, from :func:`answer_signals`' output."""
    claims: list[list[float]] = [list(map(float, c)) for c in signals["claims"]]
    n = len(claims)

    def col(name: str) -> list[float]:
        i = _COL[name]  # a version-1 row has no token fields: what no alignment reads
        return [c[i] if i < len(c) else _TOKEN_DEFAULT[name] for c in claims]

    agg: dict[str, Callable[[Sequence[float], float], float]] = {
        "min": lambda xs, d: min(xs, default=d),
        "max": lambda xs, d: max(xs, default=d),
        "mean": _mean,
    }

    def a(how: str, name: str, empty: float) -> float:
        return agg[how](col(name), empty)

    sure = bool(signals.get("logprobs"))

    def lp(how: str, name: str) -> float:
        return a(how, name, 0.0) if sure else math.nan

    return {
        "n_claims_log": math.log1p(n),
        "no_claims": 1.0 if n == 0 else 0.0,
        "min_p_supported": a("min", "p_supported", 1.0),
        "mean_p_supported": a("mean", "p_supported", 1.0),
        "min_raw_supported": a("min", "raw_supported", 1.0),
        "mean_raw_supported": a("mean", "raw_supported", 1.0),
        "max_p_contradicted": a("max", "raw_contradicted", 0.0),
        "mean_p_contradicted": a("mean", "raw_contradicted", 0.0),
        "share_supported": a("mean", "supported", 1.0),
        "share_contradicted": a("mean", "contradicted", 0.0),
        "share_unverifiable": a("mean", "unverifiable", 0.0),
        "share_rule_failed": a("mean", "rule_failed", 0.0),
        "share_no_evidence": _mean([float(v == 0) for v in col("n_evidence")], 0.0),
        "max_uncertainty": a("max", "uncertainty", 0.0),
        "min_retrieval": a("min", "best_retrieval", 1.0),
        "mean_retrieval": a("mean", "best_retrieval", 1.0),
        "trust": float(signals["trust"]),
        "all_supported": float(n > 0 and all(v == 1.0 for v in col("supported"))),
        "max_p_supported": a("max", "p_supported", 1.0),
        "min_passage_supported": a("min", "mean_passage_supported", 1.0),
        "mean_passage_supported": a("mean", "mean_passage_supported", 1.0),
        "max_retrieval": a("max", "best_retrieval", 1.0),
        "mean_n_evidence_log": math.log1p(a("mean", "n_evidence", 0.0)),
        "n_passages_log": math.log1p(float(signals["n_passages"])),
        "share_conflict": a("mean", "conflict", 0.0),
        "share_corrected": a("mean", "correction", 0.0),
        "lex_answer": float(signals["lex_answer"]),
        "lex_answer_alone": float(signals["lex_answer_alone"]),
        "min_lex_claim": a("min", "lex_claim", 1.0),
        "mean_lex_claim": a("mean", "lex_claim", 1.0),
        "answer_words_log": math.log1p(float(signals["answer_words"])),
        "mean_claim_words_log": math.log1p(a("mean", "claim_words", 0.0)),
        "min_tok_mean": a("min", "tok_mean", 1.0),
        "mean_tok_mean": a("mean", "tok_mean", 1.0),
        "min_tok_min": a("min", "tok_min", 1.0),
        "mean_tok_low": a("mean", "tok_low", 0.0),
        "max_tok_low": a("max", "tok_low", 0.0),
        "min_lp_mean": lp("min", "lp_mean"),
        "mean_lp_mean": lp("mean", "lp_mean"),
        "min_lp_min": lp("min", "lp_min"),
    }


def impute_missing(
    features: Sequence[Mapping[str, float]], names: Sequence[str]
) -> list[dict[str, float]]:
    """``features`` with each NaN of ``names`` replaced by the mean of the rows that have
    it (0 when none has): the fit's view of answers that came without logprobs."""
    means: dict[str, float] = {}
    for n in names:
        have = [f[n] for f in features if not math.isnan(f[n])]
        means[n] = sum(have) / len(have) if have else 0.0
    return [
        {k: means[k] if k in means and math.isnan(v) else v for k, v in f.items()} for f in features
    ]


def answer_features(
    verified: Verified,
    results: Sequence[ClaimResult],
    alignment: Sequence[tuple[float, float, float]] | None = None,
    logprobs: Sequence[tuple[float, float]] | None = None,
) -> dict[str, float]:
    """The named features of one verified answer (what the adapter applies at serve time)."""
    return features_from_signals(answer_signals(verified, results, alignment, logprobs))
