"""The ``lexical`` verifier: the TF-IDF baseline of seeds 001/004.

For a pair (claim c, evidence e, question q)::

    s = alpha·cos(c, e) + (1 − alpha)·cos(q, e)      (s = cos(c, e) when q is None)
    P(supported) = 1 / (1 + exp(−(slope·s + intercept)))

with TF-IDF cosines from one vectorizer fitted on the batch's texts (:mod:`guards.evidence.tfidf`).
Lexical overlap cannot tell "contradicted" from "not enough info", so the remaining mass
is split ``CONTRADICTED_SHARE`` / ``1 − CONTRADICTED_SHARE``, most of it unverifiable;
on its own this verifier never reaches P(contradicted) ≥ 0.5 (contradictions come from
the rules in :mod:`guards.rules.check`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from groundproxy.guards.evidence.tfidf import pair_cosines, tfidf_rows
from groundproxy.guards.types import CONTRADICTION_MIN, Pair, Probs

# Fitted on ../shared/data/train/*.jsonl only (never eval/), 61,740 rows, by
#   .venv/bin/python bench/fit_lexical.py
# (evidence = the row's context cut into the guard's sentence windows, best window per
# response; every (dataset, label) cell weighted equally; alpha picked on a 0.1 grid by
# mean per-dataset balanced accuracy). Train: mean per-dataset balanced accuracy 0.6173,
# pooled balanced accuracy 0.5745, pooled ROC-AUC 0.5931 (P(supported) = 0.5 at s = 0.18).
ALPHA = 0.9
SLOPE = 4.5153
INTERCEPT = -0.8086
CONTRADICTED_SHARE = 0.2


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


class LexicalVerifier:
    """TF-IDF similarity mapped to three-label probabilities (see the module docstring)."""

    name: str = "lexical"
    contradiction_min: float = CONTRADICTION_MIN  # on its own it never reaches 0.5 anyway

    def __init__(
        self,
        alpha: float = ALPHA,
        slope: float = SLOPE,
        intercept: float = INTERCEPT,
        contradicted_share: float = CONTRADICTED_SHARE,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha must be in [0, 1]")
        if not 0.0 <= contradicted_share <= 0.5:
            raise ValueError("contradicted_share must be in [0, 0.5]")
        self.alpha = alpha
        self.slope = slope
        self.intercept = intercept
        self.contradicted_share = contradicted_share

    def similarities(
        self, pairs: Sequence[Pair]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        """cos(claim, evidence), cos(question, evidence) and "has a question" per pair.

        One TF-IDF fit over the distinct texts of the whole batch.
        """
        index: dict[str, int] = {}
        for p in pairs:
            for t in (p.claim, p.evidence, p.question):
                if t is not None and t not in index:
                    index[t] = len(index)
        rows = tfidf_rows(list(index))
        evidence_rows = [index[p.evidence] for p in pairs]
        claim_sims = pair_cosines(rows, [index[p.claim] for p in pairs], evidence_rows)
        has_q = np.array([bool(p.question and p.question.strip()) for p in pairs], dtype=np.bool_)
        q_pairs = [i for i, p in enumerate(pairs) if has_q[i]]
        question_sims = np.zeros(len(pairs), dtype=np.float64)
        if q_pairs:
            question_sims[q_pairs] = pair_cosines(
                rows,
                [index[pairs[i].question or ""] for i in q_pairs],
                [index[pairs[i].evidence] for i in q_pairs],
            )
        return claim_sims, question_sims, has_q

    def raw_scores(self, pairs: Sequence[Pair]) -> npt.NDArray[np.float64]:
        """The seed's score s per pair."""
        claim_sims, question_sims, has_q = self.similarities(pairs)
        mixed = self.alpha * claim_sims + (1.0 - self.alpha) * question_sims
        return np.where(has_q, mixed, claim_sims)

    def probs_from_score(self, s: float) -> Probs:
        supported = _sigmoid(self.slope * s + self.intercept)
        rest = 1.0 - supported
        contradicted = rest * self.contradicted_share
        return Probs(supported, contradicted, rest - contradicted)

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        """Three-label probabilities for every pair, in order (one batched TF-IDF fit)."""
        if not pairs:
            return []
        return [self.probs_from_score(float(s)) for s in self.raw_scores(pairs)]
