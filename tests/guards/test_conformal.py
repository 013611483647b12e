"""Split-conformal threshold: the coverage guarantee holds, checked by simulation."""

from __future__ import annotations

import math
import random

import pytest

from groundproxy.guards.verdict.conformal import (
    beta_binomial_interval,
    beta_binomial_pmf,
    conformal_threshold,
    coverage,
)


def test_threshold_rank_and_bounds() -> None:
    ct = conformal_threshold([0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6], alpha=0.2)
    assert (ct.n, ct.k, ct.threshold) == (9, 2, 0.2)
    assert ct.lower_bound == pytest.approx(0.8) and ct.upper_bound == pytest.approx(0.9)
    small = conformal_threshold([0.5] * 5, alpha=0.1)
    assert small.k == 0 and small.threshold == -math.inf and small.lower_bound == 1.0
    with pytest.raises(ValueError):
        conformal_threshold([0.1], alpha=1.5)


def test_marginal_coverage_holds_by_simulation() -> None:
    rng = random.Random(7)
    alpha, n, trials, hits, total = 0.1, 50, 2000, 0, 0
    for _ in range(trials):
        ct = conformal_threshold([rng.random() ** 2 for _ in range(n)], alpha)
        test = [rng.random() ** 2 for _ in range(20)]
        hits += sum(1 for s in test if s >= ct.threshold)
        total += len(test)
    observed = hits / total
    ct = conformal_threshold([0.0] * n, alpha)
    assert ct.lower_bound - 0.01 <= observed <= ct.upper_bound + 0.01
    assert observed >= 1 - alpha - 0.01


def test_beta_binomial_interval() -> None:
    pmf = beta_binomial_pmf(30, 46.0, 5.0)
    assert sum(pmf) == pytest.approx(1.0)
    lo, hi = beta_binomial_interval(30, 50, 5)
    assert 0.6 < lo < 0.91 < hi <= 1.0
    assert beta_binomial_interval(10, 5, 0) == (1.0, 1.0)
    assert math.isnan(coverage([], 0.5)) and coverage([0.2, 0.8], 0.5) == 0.5
