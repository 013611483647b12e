"""The upstream-logprob signal (guards.verdict.logprobs) and how the adapter reads it."""

from __future__ import annotations

import math

import pytest

from groundproxy.guards import (
    FEATURE_SETS,
    LOGPROB_FEATURES,
    LOGPROB_SETS,
    Adapter,
    claim_logprobs,
    features_from_signals,
    impute_missing,
    parse_logprobs,
)

ANSWER = "Paris is the capital. It has 3 million people."


def _tokens(answer: str, low: str = "", lp_low: float = -5.0) -> list[tuple[str, float]]:
    words = answer.split(" ")
    pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
    return [(p, lp_low if low and low in p else -0.1) for p in pieces]


def test_parse_reads_the_openai_shapes_and_refuses_partial_ones() -> None:
    chat = {"content": [{"token": "Hi", "logprob": -0.25, "bytes": [72, 105]}], "refusal": None}
    assert parse_logprobs(chat) == (("Hi", -0.25),)
    assert parse_logprobs(chat["content"]) == (("Hi", -0.25),)
    legacy = {"tokens": ["Hi", " there"], "token_logprobs": [-0.5, -9999.0]}
    assert parse_logprobs(legacy) == (("Hi", -0.5), (" there", -30.0))  # clamped
    bad: list[object] = [None, {}, {"content": []}, [{"token": "x"}]]
    bad += [[{"token": "x", "logprob": 0.5}], [{"token": 1, "logprob": -1}]]
    bad += [{"tokens": ["a"], "token_logprobs": []}]
    for raw in bad:
        assert parse_logprobs(raw) is None, raw


def test_claim_logprobs_are_the_tokens_over_each_span() -> None:
    first, second = (0, 21), (22, len(ANSWER))
    assert ANSWER[slice(*first)] == "Paris is the capital."
    (a, b) = claim_logprobs(ANSWER, [first, second], _tokens(ANSWER, low="3")) or []
    assert a == pytest.approx((-0.1, -0.1))
    assert b[1] == -5.0 and b[0] == pytest.approx((-0.1 * 4 - 5.0) / 5)
    # the answer inside a longer generation (e.g. after a prefix) is found by its text
    prefixed = [("Sure: ", -0.2), *_tokens(ANSWER)]
    (only,) = claim_logprobs(ANSWER, [first], prefixed) or [(0.0, 0.0)]
    assert only == pytest.approx((-0.1, -0.1))
    # tokens that do not spell the answer: no signal
    assert claim_logprobs(ANSWER, [first], _tokens("Something else entirely.")) is None
    assert claim_logprobs(ANSWER, [first], []) is None


def _signals(logprobs: int) -> dict[str, object]:
    row = [0.9] * 18 + [-0.2, -1.5]  # CLAIM_FIELDS: …, lp_mean, lp_min
    return {"claims": [row], "trust": 0.9, "lex_answer": 0.5, "lex_answer_alone": 0.5,
            "n_passages": 1, "answer_words": 8, "logprobs": logprobs}  # fmt: skip


def test_features_are_nan_without_logprobs_and_imputed_for_the_fit() -> None:
    with_lp = features_from_signals(_signals(1))
    assert with_lp["min_lp_mean"] == -0.2 and with_lp["min_lp_min"] == -1.5
    without = features_from_signals(_signals(0))
    assert all(math.isnan(without[n]) for n in LOGPROB_FEATURES)
    filled = impute_missing([with_lp, without], LOGPROB_FEATURES)
    assert filled[1]["min_lp_min"] == -1.5 and filled[0] == with_lp
    # the default candidate sets never read them; the logprob sets add them
    assert not any(set(LOGPROB_FEATURES) & set(names) for names in FEATURE_SETS.values())
    assert all(set(LOGPROB_FEATURES) <= set(names) for names in LOGPROB_SETS.values())


def test_an_adapter_reads_a_missing_logprob_feature_as_its_mean() -> None:
    names = ["trust", "min_lp_min"]
    adapter = Adapter.from_dict(
        {"version": 1, "verifier": "embedhead", "features": names, "mean": [0.5, -2.0],
         "scale": [0.1, 1.0], "coef": [0.0, -3.0], "intercept": 0.0, "threshold": 0.5}
    )  # fmt: skip
    assert adapter.uses_logprobs and not adapter.uses_tokens
    assert adapter.p_hallucinated({"trust": 0.5, "min_lp_min": math.nan}) == pytest.approx(0.5)
    sure = adapter.p_hallucinated({"trust": 0.5, "min_lp_min": -0.1})
    unsure = adapter.p_hallucinated({"trust": 0.5, "min_lp_min": -6.0})
    assert sure < 0.5 < unsure
