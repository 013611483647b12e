"""Labels that never hurt (issue 42 item 4, issue 40 item 3), the pure parts: which labels
count (a burst per key, a judge outvoting a rule), the held-back test a refit must pass to
replace the decision in force, and who may let a decision decide alone."""

from __future__ import annotations

import numpy as np
import pytest

from groundproxy.errors import BadRequestError, PolicyError
from groundproxy.guards import FEATURES, Adapter, ZeroShotRecord, read_record
from groundproxy.guards.judge.merge import ADAPTER_GOOD, ZERO_SHOT_PROOF, adapter_decides
from groundproxy.proxy.cli.label_count import (
    JUDGE_LABELS_PER_KEY,
    WINDOW_S,
    counted,
    outvotes_rule,
    within_burst_cap,
)
from groundproxy.proxy.cli.refit import (
    MIN_HELD,
    NOISE_Z,
    FitOptions,
    InForce,
    Labels,
    difference_and_noise,
    held_back_split,
    refit,
)
from groundproxy.proxy.storage.feedback import Labelled, parse_labelled


def _judge(t: float, key: str | None = "k1", label: int = 1) -> Labelled:
    return Labelled("a", label, created=t, source="judge", key=key)


def test_a_burst_from_one_key_counts_at_most_the_cap_per_window() -> None:
    burst = [_judge(1000.0 + 0.15 * i) for i in range(66)]  # 66 labels in ~10 s
    other = [_judge(1000.0 + i, key="k2") for i in range(3)]
    later = [_judge(1000.0 + WINDOW_S + 1.0)]  # the window has moved on
    reviewer = [Labelled("a", 0, created=1000.0, key="k1") for _ in range(20)]
    items = burst + other + later + reviewer
    keep = within_burst_cap(items)
    assert sum(keep[:66]) == JUDGE_LABELS_PER_KEY and keep[:JUDGE_LABELS_PER_KEY] == [True] * 5
    assert all(keep[66:69]) and keep[69] and all(keep[70:])  # other key, later, reviewers
    count = counted(items, keep, [False] * len(items))
    assert (count.reviewer, count.judge, count.burst, count.judge_counted) == (20, 70, 61, 9)
    assert "at most 5 per client key per 10 minutes, 61 over that left out" in count.line()


def test_a_judge_label_never_outvotes_a_value_rule() -> None:
    assert outvotes_rule(_judge(0.0, label=0), True)
    assert not outvotes_rule(_judge(0.0, label=1), True)  # agrees with the rule
    assert not outvotes_rule(_judge(0.0, label=0), False)
    assert not outvotes_rule(Labelled("a", 0), True)  # a reviewer may (a warning says so)


def test_label_records_keep_their_source_and_key() -> None:
    stored = parse_labelled({"answer": "x", "label": "supported", "source": "judge", "key": "ab"})
    assert stored.source == "judge" and stored.key == "ab"
    assert parse_labelled({"answer": "x", "label": "supported"}).source == "reviewer"
    with pytest.raises(BadRequestError, match="source"):
        parse_labelled({"answer": "x", "label": "supported", "source": "client"})


def _rows(n: int, signal: float, seed: int = 0) -> tuple[list[dict[str, float]], list[int]]:
    rng = np.random.default_rng(seed)
    y = [int(v) for v in rng.integers(0, 2, n)]
    return [{f: float(rng.normal() + signal * yy) for f in FEATURES} for yy in y], y


def test_held_back_labels_are_reviewers_of_both_kinds() -> None:
    y = [0, 1] * 20
    reviewer = [i < 20 for i in range(40)]
    fit, held = held_back_split(Labels(y, y, reviewer), 0)
    assert all(reviewer[i] for i in held) and {y[i] for i in held} == {0, 1}
    assert len(held) == 6 and sorted(fit + held) == list(range(40))


def test_the_noise_rule() -> None:
    y = [0, 1] * 10
    d, se = difference_and_noise(y, y, [0] * 20, 0)  # right on every one vs accept-all
    assert d == 0.5 and d > NOISE_Z * se
    one_more = [*y[:19], 1 - y[19]]  # differs from the truth on one answer
    d, se = difference_and_noise(y, y, one_more, 0)
    assert 0 < d < NOISE_Z * se  # one answer's difference is noise


def test_a_refit_that_lowers_held_back_accuracy_is_refused() -> None:
    """Judge labels that disagree with what reviewers say: the refit fits them (a perfect
    cross-fit), but on the reviewers' labels held back it loses to zero-shot: kept."""
    feats, truth = _rows(60, 2.0)
    reviewer = [i < 20 for i in range(60)]
    labels = [t if r else 1 - t for t, r in zip(truth, reviewer, strict=True)]  # judge: inverted
    content = refit(feats, Labels(labels, truth, reviewer), InForce("zero-shot", truth),
                    FitOptions())  # fmt: skip
    held = content["fit"]["held_back"]
    assert content["decision"] == "zero_shot" and held["replaced"] is False
    assert held["in_force_balanced_accuracy"] == 1.0 > held["candidate_balanced_accuracy"]


def test_judge_labels_alone_never_replace_the_decision_in_force() -> None:
    feats, y = _rows(80, 2.0)
    zero = [1 - v for v in y]  # zero-shot wrong on every one: an adapter would beat it
    alone = refit(feats, Labels(y, zero, [False] * 80), InForce("zero-shot", zero), FitOptions())
    assert alone["decision"] == "zero_shot" and alone["fit"]["held_back"]["n"] == 0
    assert alone["fit"]["reviewer"] == {"n": 0, "zero_shot_balanced_accuracy": None}
    # a tenant adapter in force: kept, nothing to write
    kept = refit(feats, Labels(y, zero, [False] * 80), InForce("adapter v2", zero, "adapter"),
                 FitOptions())  # fmt: skip
    assert kept["decision"] == "keep" and kept["fit"]["kept"] == "in_force"
    # the same labels from reviewers: the adapter replaces zero-shot, and decides alone
    shipped = refit(feats, Labels(y, zero, [True] * 80), InForce("zero-shot", zero), FitOptions())
    held = shipped["fit"]["held_back"]
    assert "decision" not in shipped and held["replaced"] is True and held["n"] >= MIN_HELD
    assert shipped["fit"]["decides_alone"] is (held["candidate_balanced_accuracy"] >= ADAPTER_GOOD)
    assert Adapter.from_dict({**shipped, "version": 1}).decides_alone is True


def test_too_few_labels_besides_those_held_back() -> None:
    feats, y = _rows(12, 2.0)
    with pytest.raises(BadRequestError, match="besides the"):
        refit(feats, Labels(y, y, [True] * 12), InForce("zero-shot", y), FitOptions())


def test_only_reviewers_labels_prove_zero_shot_or_let_an_adapter_decide_alone() -> None:
    fit = {"n": 66, "zero_shot_balanced_accuracy": 1.0,
           "reviewer": {"n": 3, "zero_shot_balanced_accuracy": 1.0}}  # fmt: skip
    record = read_record({"decision": "zero_shot", "version": 2, "verifier": "v", "fit": fit})
    assert record == ZeroShotRecord(2, "v", 1.0, 3) and record.n < ZERO_SHOT_PROOF
    data = {"version": 1, "verifier": "v", "features": ["n_claims_log"], "mean": [0.0],
            "scale": [1.0], "coef": [1.0], "intercept": 0.0, "threshold": 0.5}  # fmt: skip
    good = {**data, "fit": {"oof_balanced_accuracy": 0.95}}
    far = {"n_claims_log": 5.0}
    assert adapter_decides(Adapter.from_dict(good), far)  # a file from before: as it was
    judged = {**data, "fit": {"oof_balanced_accuracy": 0.95, "decides_alone": False}}
    assert not adapter_decides(Adapter.from_dict(judged), far)
    with pytest.raises(PolicyError, match="decides_alone"):
        Adapter.from_dict({**data, "fit": {"decides_alone": "yes"}})
