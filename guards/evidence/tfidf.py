"""TF-IDF cosine over one batch of texts (seeds 001/004).

The vectorizer is fitted per call on the batch's own texts — the seed's "corpus" is the
set of texts being compared — with word unigrams + bigrams, sublinear tf and English stop
words removed. Rows are L2-normalized, so a dot product is the cosine.

The numbers are scikit-learn's ``TfidfVectorizer`` with those settings (its own analyzer for
the terms; smoothed idf ``ln((1 + n) / (1 + df)) + 1``, sublinear tf, L2 rows), computed
here directly: fitting sklearn's vectorizer cost ~12 ms per call for a handful of texts,
paid on every guarded answer; this is the same matrix (up to column order, which no cosine
sees) in a fraction of that — ``tests/guards/test_tfidf.py`` checks them against each other.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import sparse  # no stubs installed
from sklearn.feature_extraction.text import TfidfVectorizer

NGRAM_RANGE = (1, 2)
STOP_WORDS = "english"
SUBLINEAR_TF = True


def _vectorizer() -> TfidfVectorizer:
    """The scikit-learn vectorizer these rows reproduce; its analyzer is used as is."""
    return TfidfVectorizer(
        ngram_range=NGRAM_RANGE,
        stop_words=STOP_WORDS,
        sublinear_tf=SUBLINEAR_TF,
        lowercase=True,
        dtype=np.float64,
    )


# sklearn's analyzer: lower-case tokens, stop words dropped, then unigrams + bigrams (also
# guards.evidence.lexical_best's tokenizer)
analyze = _vectorizer().build_analyzer()


def tfidf_rows(texts: Sequence[str]) -> sparse.csr_matrix:
    """L2-normalized TF-IDF rows for ``texts`` (all-zero rows when nothing is left)."""
    if not texts:
        return sparse.csr_matrix((0, 0), dtype=np.float64)
    counts = [Counter(analyze(t)) for t in texts]
    df: Counter[str] = Counter()
    for c in counts:
        df.update(c.keys())
    if not df:  # empty vocabulary: only stop words or punctuation
        return sparse.csr_matrix((len(texts), 1), dtype=np.float64)
    column = {term: i for i, term in enumerate(df)}
    n = len(texts)
    idf = {term: math.log((1 + n) / (1 + d)) + 1.0 for term, d in df.items()}
    data: list[float] = []
    indices: list[int] = []
    indptr = [0]
    for c in counts:
        weights = [(1.0 + math.log(tf)) * idf[term] for term, tf in c.items()]
        norm = math.sqrt(sum(w * w for w in weights)) or 1.0
        data += [w / norm for w in weights]
        indices += [column[term] for term in c]
        indptr.append(len(indices))
    return sparse.csr_matrix(
        (np.asarray(data, dtype=np.float64), np.asarray(indices), np.asarray(indptr)),
        shape=(n, len(column)),
    )


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
