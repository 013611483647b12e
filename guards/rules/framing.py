"""Does a passage assert a claim, or only deny, quote, ask or instruct it?

The verifier reads "Rumours that the vacuum robot is waterproof are false" as support for
"The vacuum robot is waterproof" (P(supported) 0.98): the words match. :func:`frame` finds
the passage's sentence that covers the claim (at least :data:`COVER` of its content words,
at least :data:`MIN_WORDS` of them) and reads how that sentence holds the claim's words:

- ``denied`` — a negation among those words or just before them ("The vacuum robot is not
  waterproof", "No robot is waterproof") that the claim does not share, or the sentence
  calls them false ("Rumours that … are false", "Myth: …";
  :func:`guards.rules.polarity.stance`);
- ``mentioned`` — quoted, asked or instructed (:func:`guards.rules.polarity.stance`), or stated
  only for another time, edition, variant or believer (:func:`guards.rules.scope.scoped`);
- ``asserted`` — the sentence states them;
- ``None`` — no sentence covers the claim (the verifier may still find a paraphrase).

The rules (:func:`guards.rules.check.check_claim`) turn this into verdicts: a passage that only
denies or mentions the claim cannot support it, and when no passage asserts it and one
denies it, the claim is contradicted (with no correction).
"""

from __future__ import annotations

import re

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from groundproxy.guards.rules.polarity import Stance, has_negation, stance, words_between
from groundproxy.guards.rules.scope import scoped
from groundproxy.guards.rules.slots import WORD, stem

COVER = 0.75  # share of the claim's content words the sentence must hold
MIN_WORDS = 2  # a claim with fewer content words is left to the verifier
LEAD = 2  # words before the first covered word a negation may stand in
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_BOUNDARY = re.compile(r"[.!?]\s|\n|[,;:()]|\b(?:but|however|whereas|although|though|yet)\b", re.I)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")


def _content(text: str, start: int = 0, end: int | None = None) -> list[tuple[str, int, int]]:
    end = len(text) if end is None else end
    out = []
    for m in WORD.finditer(text, start, end):
        w = m.group().lower()
        if w not in ENGLISH_STOP_WORDS and len(w) > 1:
            out.append((stem(w), m.start(), m.end()))
    return out


def _negated(text: str, first: int, last: int) -> bool:
    """A negation (not a bound: "no more than") in the clause of ``last`` between the
    :data:`LEAD` words before ``first`` and ``last``."""
    begin = 0
    for m in _BOUNDARY.finditer(text, 0, last):
        begin = m.end()
    lead = [m.start() for m in _WORD.finditer(text, begin, first)][-LEAD:]
    begin = lead[0] if lead else max(begin, first)
    return has_negation(words_between(text, begin, last))


def frame(claim: str, evidence: str) -> Stance | None:
    """How ``evidence`` holds ``claim`` (module docstring)."""
    words = {w for w, _, _ in _content(claim)}
    if len(words) < MIN_WORDS:
        return None
    best: tuple[float, list[tuple[str, int, int]]] | None = None
    for m in _SENTENCE.finditer(evidence):
        hits = [t for t in _content(evidence, m.start(), m.end()) if t[0] in words]
        cover = len({w for w, _, _ in hits}) / len(words)
        if cover >= COVER and (best is None or cover > best[0]):
            best = (cover, hits)
    if best is None:
        return None
    # each claim word at its first place in the sentence: a later repeat ("… the only
    # students not mentioned in the book") must not stretch the span over another clause
    first_at: dict[str, tuple[str, int, int]] = {}
    for hit in best[1]:
        first_at.setdefault(hit[0], hit)
    hits = sorted(first_at.values(), key=lambda t: t[1])
    held = stance(evidence, hits[-1][1], negation=False)
    if held == "mentioned" or (held == "asserted" and scoped(evidence, hits[-1][1], claim)):
        return "mentioned"
    claim_hits = _content(claim)
    said = not _negated(claim, claim_hits[0][1], claim_hits[-1][2])
    told = held == "asserted" and not _negated(evidence, hits[0][1], hits[-1][2])
    return "asserted" if said == told else "denied"
