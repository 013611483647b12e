"""Features of the ``embedhead`` verifier: the SAME code at training and at inference.

For a pair (claim, evidence):

1. the evidence is cut into sentences (:func:`split_sentences`, a fast regex splitter);
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

EMB_DIM = 384
MAX_CANDIDATES = 6
MAX_SENTENCE_CHARS = 400
MAX_CLAIM_CHARS = 1200

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

_SPLIT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)]))\s+(?=[\"'“‘(\[]?[A-Z0-9])|\s*\n\s*")
_ABBREV = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Gen|Col|Sgt|Lt|Capt|Gov|Sen|Rep|Rev|Inc|Co|Corp|Ltd|"
    r"No|vs|etc|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)|\b[A-Z])\.$"
)
_ALNUM = re.compile(r"\w")
_WORD = re.compile(r"[A-Za-z0-9]+(?:[.,'][A-Za-z0-9]+)*")
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
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "at",
        "by",
        "for",
        "with",
        "about",
        "against",
        "between",
        "into",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
        "to",
        "from",
        "up",
        "down",
        "in",
        "out",
        "on",
        "off",
        "over",
        "under",
        "again",
        "further",
        "then",
        "once",
        "here",
        "there",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "such",
        "only",
        "own",
        "same",
        "so",
        "than",
        "too",
        "very",
        "s",
        "t",
        "can",
        "will",
        "just",
        "should",
        "now",
        "i",
        "me",
        "my",
        "myself",
        "we",
        "our",
        "ours",
        "ourselves",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "he",
        "him",
        "his",
        "himself",
        "she",
        "her",
        "hers",
        "herself",
        "it",
        "its",
        "itself",
        "they",
        "them",
        "their",
        "theirs",
        "themselves",
        "what",
        "which",
        "who",
        "whom",
        "this",
        "that",
        "these",
        "those",
        "am",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "have",
        "has",
        "had",
        "having",
        "do",
        "does",
        "did",
        "doing",
        "would",
        "could",
        "also",
        "as",
        "it's",
        "i'm",
        "yes",
        "well",
        "oh",
        "really",
        "like",
        "know",
        "think",
        "one",
    ]
)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (regex on end punctuation + capital, and on newlines).

    Over-long sentences are cut at whitespace into pieces of ≤ ``MAX_SENTENCE_CHARS``;
    pieces without a letter or digit are dropped.
    """
    merged: list[str] = []
    for raw in _SPLIT.split(text):
        if merged and _ABBREV.search(merged[-1]):
            merged[-1] = merged[-1] + " " + raw.strip()
        else:
            merged.append(raw.strip())
    out: list[str] = []
    for piece in merged:
        while len(piece) > MAX_SENTENCE_CHARS:
            cut = piece.rfind(" ", MAX_SENTENCE_CHARS // 2, MAX_SENTENCE_CHARS)
            if cut <= 0:
                cut = MAX_SENTENCE_CHARS
            head, piece = piece[:cut].strip(), piece[cut:].strip()
            if _ALNUM.search(head):
                out.append(head)
        if piece and _ALNUM.search(piece):
            out.append(piece)
    return out


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS]


def clip_claim(claim: str) -> str:
    """The claim text that is embedded and featurized (bounded length)."""
    claim = " ".join(claim.split())
    return claim[:MAX_CLAIM_CHARS] if claim else claim


def candidate_sentences(claim: str, sentences: Sequence[str]) -> list[str]:
    """The ≤ ``MAX_CANDIDATES`` evidence sentences sharing most (IDF-weighted) claim words.

    IDF is local to ``sentences``; ties keep document order. The chosen sentences are
    returned in document order.
    """
    if len(sentences) <= MAX_CANDIDATES:
        return list(sentences)
    claim_words = set(content_words(claim))
    bags = [set(content_words(s)) for s in sentences]
    n = len(sentences)
    df: dict[str, int] = {}
    for bag in bags:
        for w in bag & claim_words:
            df[w] = df.get(w, 0) + 1
    scores = []
    for i, bag in enumerate(bags):
        hit = bag & claim_words
        s = sum(math.log(1.0 + n / df[w]) for w in hit)
        scores.append((-s, i))
    keep = sorted(i for _, i in sorted(scores)[:MAX_CANDIDATES])
    return [sentences[i] for i in keep]


def evidence_candidates(claim: str, evidence: str) -> tuple[list[str], int]:
    """Candidate evidence sentences for ``claim`` and the evidence's sentence count."""
    sentences = split_sentences(evidence)
    if not sentences and evidence.strip():
        sentences = [evidence.strip()[:MAX_SENTENCE_CHARS]]
    return candidate_sentences(claim, sentences), len(sentences)


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
