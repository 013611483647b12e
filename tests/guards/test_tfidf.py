"""guards.evidence.tfidf computes scikit-learn's TfidfVectorizer matrix itself: the same cosines."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from groundproxy.guards.evidence import tfidf

EVAL = Path(__file__).resolve().parents[1] / "data" / "eval"  # seeded slices (tests/data)

TEXTS = [
    "The warranty lasts 12 months from the date of purchase.",
    "The warranty lasts 24 months; the warranty is free!",
    "It was never 10 years.",
    "the and of",  # only stop words: an all-zero row
    "Böðvarsson won the 1998 prize in São Paulo, Brazil — twice.",
    "東京 is the capital of Japan; 東京 has 14 million people.",
    "",
]


def _sklearn(texts: list[str]) -> np.ndarray:
    try:
        return np.asarray(tfidf._vectorizer().fit_transform(texts).toarray())
    except ValueError:  # empty vocabulary
        return np.zeros((len(texts), 1))


def _cosines(matrix: np.ndarray) -> np.ndarray:
    return np.asarray(matrix @ matrix.T)


def test_rows_equal_sklearn_cosines_on_crafted_texts() -> None:
    ours = tfidf.tfidf_rows(TEXTS).toarray()
    np.testing.assert_allclose(_cosines(ours), _cosines(_sklearn(TEXTS)), atol=1e-12)
    assert not ours[3].any() and not ours[6].any()
    np.testing.assert_allclose(np.linalg.norm(ours[[0, 1, 2, 4, 5]], axis=1), 1.0)
    # same vocabulary size (unigrams + bigrams after stop words), so the same matrix up to
    # column order
    assert ours.shape == _sklearn(TEXTS).shape


def test_only_stop_words_gives_zero_rows() -> None:
    rows = tfidf.tfidf_rows(["the of and", "is it"])
    assert rows.shape == (2, 1) and rows.nnz == 0
    assert tfidf.cosine_matrix(["the"], ["of"]).tolist() == [[0.0]]


def test_rows_equal_sklearn_on_sampled_eval_texts() -> None:
    rng = random.Random(7)
    for path in sorted(EVAL.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.open(encoding="utf-8")]
        for r in rng.sample(rows, 3):
            texts = [str(v) for v in r.values() if isinstance(v, str) and v.strip()]
            ours = tfidf.tfidf_rows(texts).toarray()
            np.testing.assert_allclose(_cosines(ours), _cosines(_sklearn(texts)), atol=1e-10)
