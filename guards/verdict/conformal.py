"""Split conformal thresholds and their finite-sample bounds (seed 003) — pure math.

Acceptance rule: a score ``s`` is accepted when ``s >= t``. Given ``n`` calibration
scores of *positives* (truly supported answers, or gold chunks) and ``k = floor(alpha·(n+1))``,
the threshold is the k-th smallest calibration score (``-inf`` when ``k = 0``). For a new
positive exchangeable with the calibration ones:

    P(s_new >= t) >= 1 - k/(n+1) >= 1 - alpha                     (always; ties only help)
    P(s_new >= t) <  1 - k/(n+1) + 1/(n+1)                         (no ties)

Conditional on the calibration set, the coverage is Beta(n+1-k, k) distributed (continuous
scores), so the number of accepted positives among ``m`` held-out ones is
BetaBinomial(m, n+1-k, k): :func:`beta_binomial_interval` gives its central interval, the
range an honest held-out coverage falls in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ConformalThreshold:
    threshold: float  # -inf when k == 0 (accept everything)
    alpha: float
    n: int
    k: int

    @property
    def lower_bound(self) -> float:
        """Guaranteed marginal coverage 1 - k/(n+1) (≥ 1 - alpha)."""
        return 1.0 - self.k / (self.n + 1)

    @property
    def upper_bound(self) -> float:
        """Marginal coverage is below this when scores have no ties."""
        return min(1.0, 1.0 - self.k / (self.n + 1) + 1.0 / (self.n + 1))


def conformal_threshold(scores: Sequence[float], alpha: float) -> ConformalThreshold:
    """The split-conformal lower threshold for ``scores`` of positives at level ``alpha``."""
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    n = len(scores)
    k = math.floor(alpha * (n + 1))
    if k < 1:
        return ConformalThreshold(-math.inf, alpha, n, 0)
    return ConformalThreshold(sorted(scores)[k - 1], alpha, n, k)


def coverage(scores: Sequence[float], threshold: float) -> float:
    """Share of ``scores`` accepted (``>= threshold``); nan when empty."""
    if not scores:
        return math.nan
    return sum(1 for s in scores if s >= threshold) / len(scores)


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def beta_binomial_pmf(m: int, a: float, b: float) -> list[float]:
    """P(X = x) for x = 0..m, X ~ BetaBinomial(m, a, b)."""
    base = _log_beta(a, b)
    out = []
    for x in range(m + 1):
        log_choose = math.lgamma(m + 1) - math.lgamma(x + 1) - math.lgamma(m - x + 1)
        out.append(math.exp(log_choose + _log_beta(x + a, m - x + b) - base))
    return out


def beta_binomial_interval(m: int, n: int, k: int, level: float = 0.95) -> tuple[float, float]:
    """Central ``level`` interval of the held-out coverage (accepted/m) for ``m`` held-out
    positives, ``n`` calibration positives and rank ``k`` (k = 0: always 1.0)."""
    if m <= 0:
        return (math.nan, math.nan)
    if k <= 0:
        return (1.0, 1.0)
    pmf = beta_binomial_pmf(m, n + 1 - k, k)
    tail = (1.0 - level) / 2.0
    cum, lo, hi = 0.0, 0, m
    for x, p in enumerate(pmf):
        cum += p
        if cum > tail:
            lo = x
            break
    cum = 0.0
    for x in range(m, -1, -1):
        cum += pmf[x]
        if cum > tail:
            hi = x
            break
    return (lo / m, hi / m)
