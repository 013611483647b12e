"""FactCC-style synthetic (evidence, claim, label) triples from training contexts.

From a document's sentences S and a chosen sentence S[i] (the evidence is a window of
S around i, as retrieval would return it):

* ``supported``     S[i] itself, or a cropped span of it (a clause, or its first ~80 %);
* ``contradicted``  the same with one number, or one capitalized name, swapped for another
                    from the same document (a number may also be shifted), or a negation
                    inserted / removed;
* ``unverifiable``  a sentence of the same document outside the window, or a sentence of
                    another document of the same source.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from groundproxy.models.features import split_sentences

_NUM = re.compile(r"\b\d+(?:[.,]\d+)*\b")
_CAP = re.compile(r"(?<=\s)[A-Z][a-z]+(?:\s[A-Z][a-z]+)*")
_NEG_ADD = [
    (
        re.compile(r"\b(is|are|was|were|has|have|had|can|will|would|could|should|did|does|do)\b"),
        "not",
    ),
]
_NEG_REMOVE = re.compile(
    r"\b(is|are|was|were|has|have|had|will|would|could|should|did|does|do)"
    r"(?: not|n't)\b"
)
_NEG_CANNOT = re.compile(r"\bcannot\b|\bcan't\b")


@dataclass(frozen=True)
class Synthetic:
    claim: str
    evidence: str
    label: str  # supported | contradicted | unverifiable
    kind: str


def crop(sentence: str, rng: random.Random) -> str:
    ws = sentence.split()
    if len(ws) < 8:
        return sentence
    if "," in sentence and rng.random() < 0.5:
        parts = [p.strip() for p in sentence.split(",") if len(p.split()) >= 5]
        if parts:
            return rng.choice(parts).rstrip(".") + "."
    keep = max(5, int(len(ws) * rng.uniform(0.6, 0.9)))
    return " ".join(ws[:keep]).rstrip(",;:") + "."


def _swap_number(sentence: str, doc: str, rng: random.Random) -> str | None:
    nums = list(_NUM.finditer(sentence))
    if not nums:
        return None
    m = rng.choice(nums)
    old: str = m.group(0)
    pool: list[str] = sorted({n for n in _NUM.findall(doc) if n != old})
    if pool and rng.random() < 0.6:
        new = rng.choice(pool)
    else:
        try:
            value = int(old.replace(",", ""))
        except ValueError:
            return None
        delta = (
            rng.choice([-3, -2, -1, 1, 2, 3, 5, 10])
            if value < 100
            else rng.choice([-100, -10, -1, 1, 10, 100])
        )
        new = str(max(0, value + delta) if value + delta != value else value + 1)
        if new == old:
            return None
    return sentence[: m.start()] + new + sentence[m.end() :]


def _swap_name(sentence: str, doc: str, rng: random.Random) -> str | None:
    names = list(_CAP.finditer(sentence))
    if not names:
        return None
    m = rng.choice(names)
    old = m.group(0)
    pool: list[str] = sorted({n for n in _CAP.findall(doc) if n != old and n not in sentence})
    if not pool:
        return None
    return sentence[: m.start()] + rng.choice(pool) + sentence[m.end() :]


def _toggle_negation(sentence: str, rng: random.Random) -> str | None:
    m = _NEG_REMOVE.search(sentence)
    if m:
        return sentence[: m.start()] + m.group(1) + sentence[m.end() :]
    m2 = _NEG_CANNOT.search(sentence)
    if m2:
        return sentence[: m2.start()] + "can" + sentence[m2.end() :]
    hits = list(_NEG_ADD[0][0].finditer(sentence))
    if not hits:
        return None
    h = rng.choice(hits)
    return sentence[: h.end()] + " not" + sentence[h.end() :]


def perturb(sentence: str, doc: str, rng: random.Random) -> tuple[str, str] | None:
    ops = ["number", "name", "negation"]
    rng.shuffle(ops)
    for op in ops:
        if op == "number":
            out = _swap_number(sentence, doc, rng)
        elif op == "name":
            out = _swap_name(sentence, doc, rng)
        else:
            out = _toggle_negation(sentence, rng)
        if out is not None and out != sentence:
            return out, op
    return None


def _usable(s: str) -> bool:
    return 30 <= len(s) <= 300 and len(s.split()) >= 5


def make_synthetic(
    docs_by_source: dict[str, Sequence[str]], per_source: int, seed: int
) -> list[tuple[str, Synthetic]]:
    """``per_source`` triples per source (a third of each label where possible)."""
    rng = random.Random(seed)
    out: list[tuple[str, Synthetic]] = []
    for source in sorted(docs_by_source):
        docs = list(docs_by_source[source])
        rng.shuffle(docs)
        split_docs = [(d, split_sentences(d)) for d in docs]
        split_docs = [(d, s) for d, s in split_docs if any(_usable(x) for x in s)]
        if len(split_docs) < 2:
            continue
        made = 0
        for k, (doc, sents) in enumerate(split_docs):
            if made >= per_source:
                break
            idx = [i for i, s in enumerate(sents) if _usable(s)]
            i = rng.choice(idx)
            lo = max(0, i - rng.randint(0, 2))
            hi = min(len(sents), i + 1 + rng.randint(0, 2))
            evidence = " ".join(sents[lo:hi])
            target = ("supported", "contradicted", "unverifiable")[k % 3]
            if target == "supported":
                claim = sents[i] if rng.random() < 0.4 else crop(sents[i], rng)
                out.append((source, Synthetic(claim, evidence, "supported", "copy/crop")))
            elif target == "contradicted":
                base = sents[i] if rng.random() < 0.5 else crop(sents[i], rng)
                p = perturb(base, doc, rng)
                if p is None:
                    continue
                out.append((source, Synthetic(p[0], evidence, "contradicted", p[1])))
            else:
                outside = [j for j in idx if j < lo - 1 or j > hi]
                if outside and rng.random() < 0.5:
                    claim = sents[rng.choice(outside)]
                    kind = "same-doc"
                else:
                    other_doc, other = split_docs[
                        (k + 1 + rng.randrange(len(split_docs) - 1)) % len(split_docs)
                    ]
                    cands = [s for s in other if _usable(s)]
                    if other_doc == doc or not cands:
                        continue
                    claim = rng.choice(cands)
                    kind = "other-doc"
                if rng.random() < 0.3:
                    claim = crop(claim, rng)
                out.append((source, Synthetic(claim, evidence, "unverifiable", kind)))
            made += 1
    return out
