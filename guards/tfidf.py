"""TF-IDF cosine over one batch of texts (seeds 001/004).

The vectorizer is fitted per call on the batch's own texts — the seed's "corpus" is the
set of texts being compared — with word unigrams + bigrams, sublinear tf and English stop
words removed. Rows are L2-normalized, so a dot product is the cosine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import sparse  # no stubs installed
from sklearn.feature_extraction.text import TfidfVectorizer

NGRAM_RANGE = (1, 2)
STOP_WORDS = "english"
SUBLINEAR_TF = True


def _vectorizer() -> TfidfVectorizer:
    return TfidfVectorizer(
        ngram_range=NGRAM_RANGE,
        stop_words=STOP_WORDS,
        sublinear_tf=SUBLINEAR_TF,
        lowercase=True,
        dtype=np.float64,
    )


def tfidf_rows(texts: Sequence[str]) -> sparse.csr_matrix:
    """L2-normalized TF-IDF rows for ``texts`` (all-zero rows when nothing is left)."""
    if not texts:
        return sparse.csr_matrix((0, 0), dtype=np.float64)
    try:
        matrix = _vectorizer().fit_transform(list(texts))
    except ValueError:  # empty vocabulary: only stop words or punctuation
        return sparse.csr_matrix((len(texts), 1), dtype=np.float64)
    return sparse.csr_matrix(matrix)


def pair_cosines(
    rows: sparse.csr_matrix, left: Sequence[int], right: Sequence[int]
) -> npt.NDArray[np.float64]:
    """Cosine of rows ``left[i]`` and ``right[i]`` for every i."""
    if len(left) == 0:
        return np.zeros(0, dtype=np.float64)
    a = rows[np.asarray(left)]
    b = rows[np.asarray(right)]
    sims = np.asarray(a.multiply(b).sum(axis=1), dtype=np.float64).ravel()
    return np.clip(sims, 0.0, 1.0)


def cosine_matrix(queries: Sequence[str], candidates: Sequence[str]) -> npt.NDArray[np.float64]:
    """``len(queries) × len(candidates)`` TF-IDF cosines, one vectorizer fit over both."""
    if not queries or not candidates:
        return np.zeros((len(queries), len(candidates)), dtype=np.float64)
    rows = tfidf_rows([*queries, *candidates])
    q = rows[: len(queries)]
    c = rows[len(queries) :]
    return np.clip(np.asarray((q @ c.T).toarray(), dtype=np.float64), 0.0, 1.0)
