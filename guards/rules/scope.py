"""Is a value asserted for the present and for the claim's own item, or only for another
time, edition, variant or believer?

A passage can assert a value and still not support the claim that states it: "Until 2019
the warranty was 48 months" (a past value), "Acme plans to offer 48 months in 2030" (a
planned one), "Some customers believe the warranty is 48 months" (someone's belief), "| 2015
edition | 48 months |" (another edition), "An extended plan can bring it to 48 months"
(a variant), or a keyword-stuffed line repeating "warranty 48 months". :func:`scoped`
finds the words that bound the value's statement that way (:data:`SCOPE_WORDS`, "until /
before / prior to YEAR", "no longer", "used to") in the statement around it — from the last
new statement before the value (";", ", and", ", but", "whereas" …) to the end of its
clause — and says the value is scoped when one of them is a word the claim does not use
itself ("Until 2019 the warranty was 48 months" supports the claim that says so).

The rules (:mod:`guards.rules.check`) read a scoped value like a quoted one: neither support nor
contradiction nor a correction (:func:`guards.rules.check.held`); :mod:`guards.rules.framing` reads
a scoped sentence as ``mentioned``; a judge's quote must not be scoped either
(:func:`guards.judge.opinion.quote_holds`).
"""

from __future__ import annotations

import re

from groundproxy.guards.rules.slots import stem

# One word each (stemmed by guards.rules.slots.stem before comparing): the value is past, planned,
# hypothetical, someone's belief, or of another edition / variant.
_PAST = "formerly previously originally"
_PLANNED = "planned planning proposed upcoming"
_HYPOTHETICAL = "could might would hypothetical"
_BELIEF = "believe believes believed think thinks thought assume assumes assumed rumoured "
_BELIEF += "rumored rumour rumor reportedly allegedly supposedly misconception"
_VARIANT = "edition editions refurbished extended extension upgrade upgraded "
_VARIANT += "optional add-on legacy discontinued older"
SCOPE_WORDS = frozenset(
    stem(w) for w in f"{_PAST} {_PLANNED} {_HYPOTHETICAL} {_BELIEF} {_VARIANT}".split()
)
# phrases: a time bound before a year ("until 2019", "prior to 2020"), "no longer", "used to",
# a plan ("plans to", "is expected to"; "plan" alone is a noun: "the Basic plan")
_PHRASES = re.compile(
    r"\b(?:(until|till|before|prior\s+to)\s+(?:the\s+)?(?:end\s+of\s+)?(?:\w+\s+)?(?:1[89]|20)\d\d\b"
    r"|(no\s+longer)\b|(used\s+to)\b|(any\s*more)\b|(in\s+the\s+past)\b|(next\s+year)\b"
    r"|(plans?\s+to|intends?\s+to|expect(?:s|ed)?\s+to|aims?\s+to)\b)",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_][^\W\d_'’-]*")
_JOINED = re.compile(r"\b(?:and|or)\b", re.I)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# a scope word before a comma reaches past it only at the head of its statement ("Until
# 2019, the warranty was …"), not from inside one ("… outside Canada until 2004, after …")
HEAD_WORDS = 4
_SENTENCE_END = re.compile(r"[.!?]\s|\n")
# a new statement begins: the scope of a word before it does not reach past it
_NEW_STATEMENT = re.compile(
    r";|,\s*(?:and|but|while|whereas|although|though)\b|\b(?:but|whereas|however)\b", re.I
)
_CLAUSE_END = re.compile(r"[,;:()]|\b(?:but|and|whereas|however|although|though)\b", re.I)
# keyword stuffing: a line that repeats its words and holds almost no function words
_STUFFED_MIN_WORDS = 8
_STUFFED_REPEAT = 3
_FUNCTION_WORDS = """a an the is are was were be been has have had of to for in on at by with from
and or but that this it its as than then"""
_FUNCTION = frozenset(_FUNCTION_WORDS.split())


def _statement(text: str, start: int) -> tuple[int, int]:
    """[begin, end) of the statement a value at ``start`` belongs to: from the last new
    statement mark before it in its sentence to the end of its clause."""
    begin = 0
    for m in _SENTENCE_END.finditer(text, 0, start):
        begin = m.end()
    for m in _NEW_STATEMENT.finditer(text, begin, start):
        begin = m.end()
    sentence_end = _SENTENCE_END.search(text, start)
    end = sentence_end.start() if sentence_end else len(text)
    clause_end = _CLAUSE_END.search(text, start, end)
    return begin, clause_end.start() if clause_end else end


def _line(text: str, start: int) -> str:
    begin = 0
    for m in _SENTENCE_END.finditer(text, 0, start):
        begin = m.end()
    end_match = _SENTENCE_END.search(text, start)
    return text[begin : end_match.start() if end_match else len(text)]


def stuffed(text: str, start: int) -> bool:
    """Is the value's sentence (or line) keyword stuffing: at least
    :data:`_STUFFED_MIN_WORDS` words, a number repeated :data:`_STUFFED_REPEAT` times or
    more ("warranty 48 months … warranty 48 months … 48 months"), and fewer than one function
    word in ten? (A knowledge-graph line repeating its names — "Award Won: MTV Video Music
    Award … Video Music Award" — repeats no number: not stuffing.)"""
    line = _line(text, start)
    words = [w.lower() for w in _WORD.findall(line)]
    if len(words) < _STUFFED_MIN_WORDS:
        return False
    function = sum(1 for w in words if w in _FUNCTION)
    counts: dict[str, int] = {}
    for n in _NUMBER.findall(line):
        counts[n] = counts.get(n, 0) + 1
    repeated = max(counts.values(), default=0) >= _STUFFED_REPEAT
    return repeated and function * 10 < len(words)


def scope_words(text: str, start: int) -> set[str]:
    """The words that bound the statement of the value at ``start`` to another time,
    edition, variant or believer (stemmed; a phrase by its first word: "until", "no" …)."""
    begin, end = _statement(text, start)
    found: set[str] = set()
    for m in _WORD.finditer(text, begin, end):
        if stem(m.group()) in SCOPE_WORDS and _reaches(text, begin, m.end(), start):
            found.add(stem(m.group()))
    for m in _PHRASES.finditer(text, begin, end):
        if m.start() <= start < m.end() or not _reaches(text, begin, m.end(), start):
            continue  # "until 2019" bounds the value 2019 itself: it is the value
        phrase = next(g for g in m.groups() if g)
        found.add(stem(phrase.split()[0]))
    return found


def _reaches(text: str, begin: int, after: int, start: int) -> bool:
    """Does a scope word ending at ``after`` (its statement starting at ``begin``) reach the
    value at ``start``: it stands after the value in its clause, or before it with no "and"
    / "or" between ("valid until 2030 and covers … 48 months" does not scope the 48 months)
    and no comma unless it heads the statement (:data:`HEAD_WORDS`)?"""
    if after > start:
        return True
    if _JOINED.search(text, after, start):
        return False
    return "," not in text[after:start] or len(_WORD.findall(text, begin, after)) <= HEAD_WORDS


def _claim_words(claim: str) -> set[str]:
    words = {stem(w) for w in _WORD.findall(claim)}
    for m in _PHRASES.finditer(claim):
        phrase = next(g for g in m.groups() if g)
        words.add(stem(phrase.split()[0]))
    return words


def scoped(text: str, start: int, claim: str) -> bool:
    """Is the value at ``start`` of ``text`` stated only for another time, edition, variant
    or believer than ``claim``'s (a scope word the claim does not use), or in a
    keyword-stuffed line?"""
    if stuffed(text, start):
        return True
    return bool(scope_words(text, start) - _claim_words(claim))
