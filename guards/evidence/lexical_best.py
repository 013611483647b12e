"""The lexical verifier's best score of one text against several passages, computed fast.

:meth:`LexicalVerifier.raw_scores` fits a scikit-learn TF-IDF vectorizer per call; the
adapter needs that score for the answer and for each of its claims (one call each), and the
vectorizer's set-up and re-tokenizing the same passages dominated (≈ 60 ms CPU for a
3-claim summary). :class:`LexicalScorer` tokenizes every text once (the vectorizer's own
analyzer: lowercase, English stop words, word uni- and bigrams) and computes the same
numbers: per call, the corpus is the distinct texts of the pairs (as ``raw_scores`` builds
it), tf sublinear, idf smooth (ln((1 + n) / (1 + df)) + 1), rows L2-normalized, cosines
clipped to [0, 1], s = alpha·cos(text, passage) + (1 − alpha)·cos(question, passage).
``tests/guards/test_lexical_best.py`` checks it equals ``raw_scores``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from groundproxy.guards.evidence.tfidf import analyze
from groundproxy.guards.verdict.lexical import ALPHA


class LexicalScorer:
    """Best lexical score s of a text against passages; texts tokenized once per scorer."""

    def __init__(self, alpha: float = ALPHA) -> None:
        self.alpha = alpha
        self._terms: dict[str, Counter[str]] = {}

    def _counts(self, text: str) -> Counter[str]:
        found = self._terms.get(text)
        if found is None:
            found = self._terms[text] = Counter(analyze(text))
        return found

    def best(self, text: str, passages: Sequence[str], question: str | None) -> float:
        """max over passages of s (0 when there is no passage or the text is blank)."""
        if not text.strip() or not passages:
            return 0.0
        corpus = list(dict.fromkeys([text, *passages, *([question] if question else [])]))
        df: Counter[str] = Counter()
        for t in corpus:
            df.update(self._counts(t).keys())
        n = len(corpus)
        idf = {term: math.log((1 + n) / (1 + d)) + 1.0 for term, d in df.items()}

        def vector(t: str) -> dict[str, float]:
            w = {term: (1.0 + math.log(c)) * idf[term] for term, c in self._counts(t).items()}
            norm = math.sqrt(sum(v * v for v in w.values()))
            return {term: v / norm for term, v in w.items()} if norm > 0 else {}

        def cos(a: dict[str, float], b: dict[str, float]) -> float:
            if len(b) < len(a):
                a, b = b, a
            return min(1.0, max(0.0, sum(v * b.get(term, 0.0) for term, v in a.items())))

        vt = vector(text)
        vq = vector(question) if question else None
        best = 0.0
        for p in dict.fromkeys(passages):
            vp = vector(p)
            s = cos(vt, vp)
            if vq is not None:
                s = self.alpha * s + (1.0 - self.alpha) * cos(vq, vp)
            best = max(best, s)
        return best
