"""Answer → atomic claims, each with its exact [start, end) span in the original answer.

1. :func:`guards.claims.markdown.prose_blocks` keeps the prose: paragraphs, list-item text,
   quoted text and table body cells; code, headings and table headers are skipped.
2. pysbd splits each block into sentences (:mod:`guards.claims.sentences`).
3. Questions, lead-ins ending in ":", greetings and pleasantries ("Sure!", "I hope this
   helps.", "Let me know if …") are dropped; a leading interjection ("Sure, ") is
   trimmed off the span.
4. Coordinated clauses are split on "; ", ", and ", ", but ", " and ", " but " — only
   where both sides look like clauses (≥ 3 words, one of them verb-like) and the right
   side does not open with a verb, so noun lists ("red, green and blue") and
   shared-subject predicates ("opens at 9 and closes at 5") stay whole.

Invariant: ``answer[c.span[0]:c.span[1]] == c.text`` for every claim.
"""

from __future__ import annotations

import re

from groundproxy.errors import GuardTimeoutError
from groundproxy.guards.claims.markdown import prose_blocks
from groundproxy.guards.claims.sentences import Stop, sentence_spans, trim_span
from groundproxy.guards.rules.lexicon import PRONOUN_SUBJECTS, is_verbish
from groundproxy.guards.types import Claim

_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d[\d,.]*")
_ALNUM = re.compile(r"\w")
_SEPARATOR = re.compile(r";\s+|,\s+(?:and|but)\s+|\s+(?:and|but)\s+")
_LEAD_INTERJECTION = re.compile(
    r"^(?:sure|certainly|of course|absolutely|okay|ok|alright|great question|good question"
    r"|great|hello|hi|hey)\s*[,!.]\s+",
    re.IGNORECASE,
)
_PLEASANTRY = re.compile(
    r"^(?:(?:i\s+)?hope\s+(?:this|that|it)\s+helps|let\s+me\s+know|please\s+let\s+me\s+know"
    r"|feel\s+free\s+to|if\s+you\s+have\s+any\s+(?:other\s+|more\s+|further\s+)?questions"
    r"|(?:i'?m|i\s+am|i'?d\s+be|i\s+would\s+be)\s+(?:happy|glad)\s+to"
    r"|(?:happy|glad)\s+to\s+help|good\s+luck|best\s+of\s+luck|have\s+a\s+(?:great|nice|good)"
    r"|thanks|thank\s+you|you'?re\s+welcome|cheers|best\s+regards|kind\s+regards)\b",
    re.IGNORECASE,
)
_GREETING = re.compile(
    r"^(?:sure|certainly|absolutely|of\s+course|definitely|okay|ok|alright|great|hello|hi|hey"
    r"|greetings|good\s+(?:morning|afternoon|evening)|no\s+problem"
    r"|(?:great|good|excellent|interesting)\s+question|what\s+a\s+(?:great|good)\s+question)"
    r"\b",
    re.IGNORECASE,
)


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _is_filler(text: str) -> bool:
    """Greetings, pleasantries, questions, lead-ins and punctuation-only bits."""
    stripped = text.strip().strip("*_").strip()
    if not _ALNUM.search(stripped):
        return True
    if stripped.endswith("?") or stripped.endswith(":"):
        return True
    if _PLEASANTRY.match(stripped):
        return True
    return bool(_GREETING.match(stripped)) and len(_words(stripped)) <= 5


def _clause_like(text: str) -> bool:
    words = _words(text)
    if len(words) < 3:
        return False
    if any(is_verbish(w) for w in words):
        return True
    return words[0].lower() in PRONOUN_SUBJECTS


def _bracket_depth(text: str) -> int:
    return text.count("(") - text.count(")") + text.count("[") - text.count("]")


def _split_clauses(answer: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split one sentence on coordinating separators where both sides are clauses."""
    sentence = answer[start:end]
    pieces: list[tuple[int, int]] = []
    left = 0
    for m in _SEPARATOR.finditer(sentence):
        if m.start() <= left:
            continue
        before = sentence[left : m.start()]
        after = sentence[m.end() :]
        if _bracket_depth(sentence[: m.start()]) > 0 or sentence[: m.start()].count('"') % 2:
            continue
        if _clause_like(before) and _clause_like(after) and not is_verbish(_words(after)[0]):
            pieces.append((start + left, start + m.start()))
            left = m.end()
    pieces.append((start + left, end))
    out: list[tuple[int, int]] = []
    for s, e in pieces:
        while e > s and answer[e - 1] in ",;: \t\n":
            e -= 1
        s, e = trim_span(answer, s, e)
        if e > s:
            out.append((s, e))
    return out


def _trim_interjection(answer: str, start: int, end: int) -> tuple[int, int]:
    m = _LEAD_INTERJECTION.match(answer[start:end])
    if m and _ALNUM.search(answer, start + m.end(), end):
        return start + m.end(), end
    return start, end


def decompose(answer: str, halt: Stop | None = None) -> list[Claim]:
    """Atomic claims of ``answer`` in reading order (see the module docstring).

    ``halt`` (true past the caller's deadline) is checked between blocks and sentence
    windows: GuardTimeoutError then, so abandoned work stops."""
    claims: list[Claim] = []
    for block in prose_blocks(answer):
        if halt is not None and halt():
            raise GuardTimeoutError("guard stopped at its deadline")
        b_start, b_end = block.span
        if block.kind == "cell":
            sentences = [block.span]
        else:
            sentences = sentence_spans(answer, b_start, b_end, join_lines=True, halt=halt)
        for s_start, s_end in sentences:
            s_start, s_end = _trim_interjection(answer, s_start, s_end)
            if _is_filler(answer[s_start:s_end]):
                continue
            for c_start, c_end in _split_clauses(answer, s_start, s_end):
                text = answer[c_start:c_end]
                if not _is_filler(text):
                    claims.append(Claim(text=text, span=(c_start, c_end)))
    return claims
