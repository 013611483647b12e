"""Distinct guarded answers for the speed benchmarks (the verdict cache must not serve them).

Answer ``i`` is made of the first sentences of ``claims`` documents of the index other than
the one its question is about, chosen with a seeded RNG; about ``wrong_share`` of the
answers have one sentence with a wrong value (a number changed, else two words swapped),
so the rules and the rewrite run too. Every answer is asked for by a distinct question
carrying the tag ``[a-<i>]``, which the fake upstream's script matches (one rule each).

A second pass that repeats the same answers measures the verdict cache (cache hits); the
benchmarks report the two figures separately.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from groundproxy.retrieval.sentence_split import split_sentences

_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class Answer:
    tag: str
    question: str
    text: str
    wrong: bool


def _wrong(sentence: str, rng: random.Random) -> str:
    m = _NUMBER.search(sentence)
    if m:
        value = int(m.group(0))
        return f"{sentence[: m.start()]}{value + rng.randint(2, 9)}{sentence[m.end() :]}"
    ws = sentence.split()
    if len(ws) >= 4:
        i = rng.randrange(1, len(ws) - 2)
        ws[i], ws[i + 1] = ws[i + 1], ws[i]
    return " ".join(ws)


def distinct_answers(
    docs: Sequence[tuple[str, str]],
    n: int,
    *,
    claims: int = 5,
    wrong_share: float = 0.3,
    seed: int = 7,
) -> list[Answer]:
    """``n`` answers of ``claims`` sentences each, from ``docs`` = [(doc id, text)]."""
    firsts = [(doc_id, s[0]) for doc_id, text in docs if (s := split_sentences(text))]
    if len(firsts) <= claims:
        raise ValueError(f"need more than {claims} documents with a sentence")
    rng = random.Random(seed)
    out: list[Answer] = []
    # claims come from a shuffled deck, reshuffled when spent: no sentence repeats until
    # every one has been used (a repeated claim would hit the embedder's vector LRU)
    deck: list[int] = []
    for i in range(n):
        about = i % len(firsts)
        others: list[int] = []
        while len(others) < claims:
            if not deck:
                deck = list(range(len(firsts)))
                rng.shuffle(deck)
            j = deck.pop()
            if j != about and j not in others:
                others.append(j)
        sentences = [firsts[j][1] for j in others]
        wrong = rng.random() < wrong_share
        if wrong:
            k = rng.randrange(len(sentences))
            sentences[k] = _wrong(sentences[k], rng)
        tag = f"[a-{i:05d}]"
        question = f"{tag} Tell me about {firsts[about][0]} and related topics."
        out.append(Answer(tag, question, " ".join(sentences), wrong))
    return out


def upstream_script(answers: Sequence[Answer], default: str) -> dict[str, Any]:
    """The fake upstream's script: one rule per answer, matched on its tag."""
    return {"default": default, "rules": [{"match": a.tag, "answer": a.text} for a in answers]}
