"""Features of the ``embedhead`` verifier: the SAME code at training and at inference.

For a pair (claim, evidence):

1. the evidence is cut into sentences (:func:`split_sentences`, a fast regex splitter;
   the text helpers live in :mod:`models.evidence_text`);
2. at most ``MAX_CANDIDATES`` of them are kept by a cheap lexical pre-ranking
   (:func:`candidate_sentences`: IDF-weighted recall of the claim's content words, local to
   the evidence), so a long context costs a bounded number of embeddings;
3. the claim and the candidates are embedded (frozen all-MiniLM-L6-v2, unit vectors);
4. :func:`pair_features` builds ``[u, v, |u−v|, u·v, scalars]`` with ``u`` the claim vector,
   ``v`` the best-matching candidate's vector and the scalars of :data:`SCALAR_NAMES`.

Nothing here loads a model; the embedder is passed in by the caller.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from groundproxy.models.evidence_text import (
    MAX_CANDIDATES,
    MAX_CLAIM_CHARS,
    MAX_SENTENCE_CHARS,
    STOPWORDS,
    candidate_sentences,
    clip_claim,
    content_words,
    evidence_candidates,
    split_sentences,
    words,
)

# the evidence-text helpers (models.evidence_text) are re-exported: one import for callers
__all__ = [
    "EMB_DIM",
    "MAX_CANDIDATES",
    "MAX_CLAIM_CHARS",
    "MAX_SENTENCE_CHARS",
    "N_FEATURES",
    "N_SCALARS",
    "SCALAR_NAMES",
    "STOPWORDS",
    "Encode",
    "candidate_sentences",
    "clip_claim",
    "content_words",
    "evidence_candidates",
    "featurize",
    "lexical_scalars",
    "pair_features",
    "split_sentences",
    "words",
]

EMB_DIM = 384

SCALAR_NAMES: tuple[str, ...] = (
    "cos_top1",
    "cos_top2",
    "cos_mean_top3",
    "recall_evidence",
    "recall_best",
    "bigram_recall",
    "number_agreement",
    "has_numbers",
    "entity_agreement",
    "has_entities",
    "negation_mismatch",
    "log_claim_tokens",
    "log_evidence_sentences",
)
N_SCALARS = len(SCALAR_NAMES)
N_FEATURES = 4 * EMB_DIM + N_SCALARS

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITAL = re.compile(r"\b[A-Z][a-zA-Z]+")
_NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "nobody",
        "nothing",
        "neither",
        "nor",
        "cannot",
        "without",
        "n't",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "doesn't",
        "don't",
        "didn't",
        "won't",
        "can't",
        "couldn't",
        "shouldn't",
        "hasn't",
        "haven't",
        "hadn't",
    ]
)


@dataclass(frozen=True)
class _Lex:
    recall_evidence: float
    recall_best: float
    bigram_recall: float
    number_agreement: float
    has_numbers: float
    entity_agreement: float
    has_entities: float
    negation_mismatch: float
    log_claim_tokens: float


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def _entities(text: str) -> set[str]:
    """Capitalized words that do not start a sentence (lower-cased)."""
    out: set[str] = set()
    for m in _CAPITAL.finditer(text):
        before = text[: m.start()].rstrip()
        if not before or before[-1] in ".!?:\"'([\n":
            continue
        w = m.group(0).lower()
        if w not in STOPWORDS:
            out.add(w)
    return out


def _has_negation(ws: Sequence[str]) -> bool:
    return any(w in _NEGATIONS or w.endswith("n't") for w in ws)


def lexical_scalars(claim: str, evidence_text: str, best_sentence: str) -> _Lex:
    cw = content_words(claim)
    cset = set(cw)
    ev_words = words(evidence_text)
    ev_set = set(ev_words)
    best_set = set(words(best_sentence))
    recall_ev = len(cset & ev_set) / len(cset) if cset else 1.0
    recall_best = len(cset & best_set) / len(cset) if cset else 1.0
    cbig = {(a, b) for a, b in itertools.pairwise(cw)}
    ev_content = [w for w in ev_words if w not in STOPWORDS]
    ebig = {(a, b) for a, b in itertools.pairwise(ev_content)}
    bigram = len(cbig & ebig) / len(cbig) if cbig else recall_ev
    nums = _numbers(claim)
    ev_nums = _numbers(evidence_text)
    num_agree = len(nums & ev_nums) / len(nums) if nums else 1.0
    ents = _entities(claim)
    ent_agree = len(ents & ev_set) / len(ents) if ents else 1.0
    neg = float(_has_negation(words(claim)) != _has_negation(words(best_sentence)))
    return _Lex(
        recall_evidence=recall_ev,
        recall_best=recall_best,
        bigram_recall=bigram,
        number_agreement=num_agree,
        has_numbers=float(bool(nums)),
        entity_agreement=ent_agree,
        has_entities=float(bool(ents)),
        negation_mismatch=neg,
        log_claim_tokens=math.log1p(len(words(claim))),
    )


def pair_features(
    claim: str,
    claim_vector: npt.NDArray[np.float32],
    evidence_text: str,
    candidates: Sequence[str],
    candidate_vectors: npt.NDArray[np.float32],
    n_evidence_sentences: int,
) -> npt.NDArray[np.float32]:
    """One feature row ``[u, v, |u−v|, u·v, scalars]`` (length :data:`N_FEATURES`)."""
    u = np.asarray(claim_vector, dtype=np.float32).reshape(EMB_DIM)
    if len(candidates) == 0:
        v = np.zeros(EMB_DIM, dtype=np.float32)
        sims = np.zeros(1, dtype=np.float32)
        best = ""
    else:
        cv = np.asarray(candidate_vectors, dtype=np.float32).reshape(len(candidates), EMB_DIM)
        sims_all = cv @ u
        order = np.argsort(-sims_all, kind="stable")
        v = cv[int(order[0])]
        sims = sims_all[order]
        best = candidates[int(order[0])]
    top1 = float(sims[0])
    top2 = float(sims[1]) if len(sims) > 1 else top1
    mean3 = float(np.mean(sims[:3]))
    lex = lexical_scalars(claim, evidence_text, best)
    scalars = np.array(
        [
            top1,
            top2,
            mean3,
            lex.recall_evidence,
            lex.recall_best,
            lex.bigram_recall,
            lex.number_agreement,
            lex.has_numbers,
            lex.entity_agreement,
            lex.has_entities,
            lex.negation_mismatch,
            lex.log_claim_tokens,
            math.log1p(n_evidence_sentences),
        ],
        dtype=np.float32,
    )
    return np.concatenate([u, v, np.abs(u - v), u * v, scalars]).astype(np.float32)


Encode = Callable[[Sequence[str]], npt.NDArray[np.float32]]


def featurize(pairs: Sequence[tuple[str, str]], encode: Encode) -> npt.NDArray[np.float32]:
    """Feature rows for ``(claim, evidence)`` pairs with ONE ``encode`` call.

    ``encode`` maps texts to unit vectors (the frozen MiniLM embedder, or a cache of it).
    """
    if not pairs:
        return np.zeros((0, N_FEATURES), dtype=np.float32)
    prepared: list[tuple[str, str, list[str], int]] = []
    index: dict[str, int] = {}
    for claim, evidence in pairs:
        c = clip_claim(claim) or "."
        cands, n_sent = evidence_candidates(c, evidence)
        prepared.append((c, evidence, cands, n_sent))
        for t in (c, *cands):
            if t not in index:
                index[t] = len(index)
    vectors = np.asarray(encode(list(index)), dtype=np.float32).reshape(len(index), EMB_DIM)
    out = np.empty((len(prepared), N_FEATURES), dtype=np.float32)
    for row, (c, evidence, cands, n_sent) in enumerate(prepared):
        cand_vecs = (
            vectors[[index[t] for t in cands]]
            if cands
            else np.zeros((0, EMB_DIM), dtype=np.float32)
        )
        out[row] = pair_features(c, vectors[index[c]], evidence, cands, cand_vecs, n_sent)
    return out
