"""Does an evidence value fill the same slot as the claim's value?

A rule correction swaps the claim's value for the evidence's; that is right only when both
speak of the same item and the same attribute. "Repairs are done within 90 days of
delivery" must not become "30 days" from "You can return an unused robot within 30 days of
delivery", nor "The Acme lawn mower comes with a limited warranty of 24 months" take the
vacuum robot's "12 months".

:func:`same_slot` compares the clause around each value: both are cut into content words
(stemmed; every quantity one placeholder) and aligned (:class:`difflib.SequenceMatcher`).
Words only one side has are fine ("limited", "from the date of purchase"): the evidence may
say more, the claim less. A *substitution* — at the same place, the claim has a word the
evidence lacks and the evidence one the claim lacks ("repairs" / "return unused robot",
"lawn mower" / "vacuum robot") — means another item or attribute: no correction (the claim
is then flagged, not rewritten). A synonym counts as a substitution too ("lasts" /
"runs"): when unsure, flag. A claim word replaced in the clause but standing elsewhere
in the passage, in a sentence that also holds the evidence's word, is taken for an anaphor
("The magazine was started in 1989" after "First for Women is a woman's magazine"), ranked
after a clause with no substitution; elsewhere but never beside it ("The battery warranty
is not 48 months. The robot warranty is 12 months." for the battery) it is another item. Scripts
written without spaces (Japanese, Chinese, Thai) have no words to align: there only the
rules' other checks apply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from groundproxy.guards.rules.lexicon import is_verbish

WORD = re.compile(r"[^\W\d_][^\W\d_'’-]*")  # any script: "Garantie", "保証期間は"
PLACEHOLDER = "#"
_SENTENCE_END = re.compile(r"[.!?]\s|\n")
# a clause ends at a comma, semicolon, colon or bracket, or a contrast word
_CLAUSE_MARK = re.compile(r"[,;:()]|\b(?:but|while|whereas|although|though|however)\b", re.I)
# scripts written without spaces between words
_UNSPACED = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_JOIN = re.compile(r"\b(?:and|or)\s+([^\W\d_][^\W\d_'’-]*)", re.I)


def stem(word: str) -> str:
    """A crude stem: "repairs" / "repair", "covered" / "covers", "batteries" / "battery"."""
    w = word.lower().replace("’", "'").removesuffix("'s")
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and not w.endswith("ss") and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    return w.removesuffix("e") if len(w) > 3 else w


def _clause(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """[start, end) of the clause of ``text`` that holds ``span``: its sentence, cut at
    clause marks and at "and" / "or" before a verb ("… 24 months and costs 300 euros")."""
    start = 0
    for m in _SENTENCE_END.finditer(text, 0, span[0]):
        start = m.end()
    end_match = _SENTENCE_END.search(text, span[1])
    end = end_match.start() + 1 if end_match else len(text)
    for m in _CLAUSE_MARK.finditer(text, start, span[0]):
        start = m.end()
    for m in _JOIN.finditer(text, start, span[0]):
        if is_verbish(m.group(1)):
            start = m.start(1)
    after = _CLAUSE_MARK.search(text, span[1], end)
    end = after.start() if after else end
    for m in _JOIN.finditer(text, span[1], end):
        if is_verbish(m.group(1)):
            end = m.start()
            break
    return start, end


def _tokens(text: str, bounds: tuple[int, int], values: Sequence[tuple[int, int]]) -> list[str]:
    """The clause's content words, stemmed, each quantity in it one :data:`PLACEHOLDER`."""
    out: list[str] = []
    start, end = bounds
    inside = sorted((s, e) for s, e in values if start <= s < end)
    at = start
    for s, e in [*inside, (end, end)]:
        for m in WORD.finditer(text, at, max(at, s)):
            w = m.group().lower()
            if w not in ENGLISH_STOP_WORDS and len(w) > 1:
                out.append(stem(w))
        if s < end:
            out.append(PLACEHOLDER)
        at = max(at, e)
    return out


def same_slot(
    claim: str,
    claim_value: tuple[int, int],
    claim_values: Sequence[tuple[int, int]],
    evidence: str,
    evidence_value: tuple[int, int],
    evidence_values: Sequence[tuple[int, int]],
) -> int:
    """How surely the clauses around the two values speak of the same item and attribute:
    2 — no substitution; 1 — the claim's words replaced in the clause stand elsewhere in
    the passage (an anaphor: "First for Women is a magazine … The magazine was started in
    1989"); 0 — a substitution (module docstring). ``*_values``: every quantity's span in
    each text (masked alike)."""
    if _UNSPACED.search(claim) or _UNSPACED.search(evidence):
        return 2  # no word boundaries to align on (Japanese, Chinese, Thai …)
    a = _tokens(claim, _clause(claim, claim_value), claim_values)
    b = _tokens(evidence, _clause(evidence, evidence_value), evidence_values)
    only_a, only_b = set(a) - set(b), set(b) - set(a)
    sentences = _sentences(evidence, evidence_values)
    passage = set().union(*sentences)
    sure = 2
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        replacing = set(b[j1:j2]) & only_b
        if op != "replace" or not replacing:
            continue
        replaced = set(a[i1:i2]) & only_a
        if replaced - passage:
            return 0
        if replaced and not any(s & replaced and s & replacing for s in sentences):
            return 0  # "battery" elsewhere, never with "robot": another item, not an anaphor
        if replaced:
            sure = 1
    return sure


def _sentences(text: str, values: Sequence[tuple[int, int]]) -> list[set[str]]:
    """Each sentence's content words (as :func:`_tokens` reads them)."""
    out, start = [], 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = m.end() if m else len(text)
        out.append(set(_tokens(text, (start, end), values)))
        start = end
    return out
