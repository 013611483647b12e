"""Is a value asserted where it stands, or only denied or mentioned?

A passage is evidence for a value only where it *asserts* it. :func:`stance` reads the
value's sentence and says one of:

- ``denied`` — a negation word ("not", "never", "neither … nor", a "-n't" verb …;
  :data:`guards.rules.lexicon.NEGATIONS`) stands among the :data:`WINDOW` words before it in its
  own clause, unless the negation only bounds it ("no more than 10", "not before 9 am",
  "not only 5"; :data:`guards.rules.lexicon.NEGATION_BOUNDS`); or its sentence calls what it says
  false ("Rumours that … 48 months are false", "It is not true that …", "Myth: …";
  :data:`guards.rules.lexicon.FALSITY` after a copula, or as a leading label), takes it back
  ("…, but this is wrong": the falsity's subject an anaphor), disowns it ("We deny that …",
  "It was wrongly reported that …", "it is not the case that …";
  :data:`guards.rules.lexicon.DISOWNING`), or the next sentence rules it false ("Verdict: false");
- ``mentioned`` — it is quoted (a statement of :data:`QUOTED_WORDS` words or more in "…",
  “…”; a quoted name is not a mention), asked ("Does it last 48 months?": its
  segment of a sentence ending in "?" opens with :data:`guards.rules.lexicon.INTERROGATIVES`), or
  said on instruction ("tell them that …", "agents should say …", "answer that …": a speech verb
  in the imperative or after a modal, :data:`guards.rules.lexicon.SPEECH_VERBS`), or supposed
  ("If … 48 months, …", "… ask whether …", "Imagine that …": its clause opens with a
  conditional or holds a supposition word); single quotes count as quotes ('…' opened after
  a space, closed before one — not an apostrophe): the passage neither asserts nor denies it;
- ``asserted`` — otherwise.

The rules (:mod:`guards.rules.check`) count a value as stated by the evidence only where the
evidence asserts it with the claim's polarity: a denial contradicts the claim (a *mismatch*
with no correction), a mention is neither support nor contradiction, and a correction's new
value must be asserted too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from groundproxy.guards.rules.lexicon import (
    ANAPHORS,
    CONDITIONAL_LEADS,
    CONDITIONALS,
    COPULAS,
    DISOWNING,
    FALSITY,
    IMPERATIVE_LEADS,
    INTERROGATIVES,
    MODALS,
    NEGATION_BOUNDS,
    NEGATIONS,
    RULING_LABELS,
    SPEECH_VERBS,
    SPEECH_VERBS_MARKED,
    SUPPOSITIONS,
)

Stance = Literal["asserted", "denied", "mentioned"]

WINDOW = 8  # words before a value a negation may stand in (its clause only)
QUOTED_WORDS = 4  # a quotation this long is a statement (shorter: a name or a term)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_SENTENCE_END = re.compile(r"[.!?;]\s|\n")
# where a negation's reach ends: a comma, colon, bracket, or a contrast word
_CLAUSE_MARK = re.compile(r"[,:()]|\b(?:but|however|whereas|although|though|yet)\b", re.I)
_QUOTES = {'"': '"', "“": "”", "«": "»", "„": "“"}
_TERMINATOR = re.compile(r"[.!?](?=\s|$)|\n")
_SEGMENT = re.compile(r"[.!?;:](?=\s)|\n|\s[-–—]\s")
_LABEL = re.compile(r"\s*([A-Za-z ]{1,20}):")
_TRUTH = frozenset(("true", "correct", "accurate", "right"))
_FILLERS = frozenset(("a", "an", "simply", "just", "completely", "entirely", "totally"))
# between a value and a falsity predicate: another statement begins ("…, and claims that")
_NEW_STATEMENT = re.compile(r"\bthat\b|[;]|,\s*(?:and|but|while|whereas)\b", re.I)
_ANY_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*|[,:;]")
# after a speech verb that is also a noun: "that", a colon or a quote within a few words
_MARKED = re.compile(r"""(?:\s+[A-Za-z'’]+){0,3}?\s*(?:that\b|["“«„])""")
_NEW_CLAUSE = frozenset(("and", "or", "then"))
_NOT_THE_CASE = re.compile(r"(?:\bnot|n't|\bnever)\s+(?:\w+\s+)?the\s+case\s+that\b", re.I)
_RULING = re.compile(r"\s*([A-Za-z]+)\s*:\s*([A-Za-z]+)")
_SINGLE_OPEN = re.compile(r"(?<![^\s(\[:])['‘](?=\w)")
_NUMBER_AFTER = re.compile(r"\.?\s?\d")
_SINGLE_CLOSE = re.compile(r"(?<=\S)['’](?=[\s.,;:!?)\]]|$)")


def _is_negation(word: str) -> bool:
    w = word.lower().replace("’", "'")
    return w in NEGATIONS or w.endswith("n't")


def _sentence_start(text: str, start: int) -> int:
    begin = 0
    for m in _SENTENCE_END.finditer(text, 0, start):
        begin = m.end()
    return begin


def _clause_start(text: str, begin: int, start: int) -> int:
    for m in _CLAUSE_MARK.finditer(text, begin, start):
        begin = m.end()
    return begin


def denied(text: str, start: int) -> bool:
    """Is the value starting at ``start`` of ``text`` under a negation in its clause?"""
    begin = _clause_start(text, _sentence_start(text, start), start)
    words = words_between(text, begin, start)[-WINDOW:]
    # "have not won since February 2011", "has not fought since beating X in 2013": the
    # negation is of what came after the date, which it asserts
    since = max((i for i, w in enumerate(words) if w.lower() == "since"), default=-1)
    return has_negation(words[since + 1 :])


def words_between(text: str, begin: int, end: int) -> list[str]:
    """The words of ``text[begin:end]`` a negation is looked for in: a number sign ("Wasps
    No 8", "No. 1 seed") is not the word "no"."""
    return [
        m.group()
        for m in _WORD.finditer(text, begin, end)
        if not (m.group() == "No" and _NUMBER_AFTER.match(text, m.end()))
    ]


def has_negation(words: Sequence[str]) -> bool:
    """Does a negation stand among ``words`` that is not a bound ("no more than 10", "not
    before 9 am", "not only 5") nor a denial denied ("We do not deny that …")?"""
    for i, w in enumerate(words):
        if _is_negation(w):
            after = words[i + 1].lower() if i + 1 < len(words) else ""
            if after not in NEGATION_BOUNDS and after not in DISOWNING:
                return True
    return False


def _quoted(text: str, begin: int, start: int) -> bool:
    """Is ``start`` inside a quoted statement (:data:`QUOTED_WORDS` words or more) opened in
    its paragraph? A quoted name or term ("referred to as "The City"") is not a mention."""
    para = text.rfind("\n", 0, start) + 1
    begin = min(begin, para)
    open_at: int | None = None
    close = ""
    for i in range(begin, start):
        ch = text[i]
        if open_at is None and ch in _QUOTES:
            open_at, close = i, _QUOTES[ch]
        elif open_at is not None and ch == close:
            open_at = None
    if open_at is None:
        return _single_quoted(text, para, start)
    end = text.find(close, start)
    inside = text[open_at + 1 : end if end >= 0 else len(text)]
    return len(_WORD.findall(inside)) >= QUOTED_WORDS


def _single_quoted(text: str, para: int, start: int) -> bool:
    """The same for '…' / ‘…’: an opening quote after a space (or a bracket, a colon) and
    before a word, not closed before ``start`` (a closing quote follows a non-space and
    precedes a space or a punctuation mark — "don't" and "robot's" are neither)."""
    opens = [m.end() for m in _SINGLE_OPEN.finditer(text, para, start)]
    if not opens or _SINGLE_CLOSE.search(text, opens[-1], start):
        return False
    close = _SINGLE_CLOSE.search(text, start)
    inside = text[opens[-1] : close.start() if close else len(text)]
    return len(_WORD.findall(inside)) >= QUOTED_WORDS


def _asked(text: str, start: int) -> bool:
    """Is the value inside a question: its sentence ends with a question mark and the
    segment holding it (after the last sentence end, colon, semicolon or dash) opens with
    an interrogative ("Does it last 48 months?", "Q: Is it 48 months?" — not the title
    "Health Status 2016: Report - How healthy are we?")."""
    end = _TERMINATOR.search(text, start)
    if end is None or text[end.start()] != "?":
        return False
    begin = 0
    for m in _SEGMENT.finditer(text, 0, start):
        begin = m.end()
    first = _WORD.search(text, begin, end.start())
    return first is not None and first.group().lower() in INTERROGATIVES


def _words(text: str, begin: int, end: int) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(text, begin, end)]


def _falsified(text: str, begin: int, start: int) -> bool:
    """Does the value's sentence call what it says false? A falsity predicate after a
    copula (:data:`~guards.rules.lexicon.FALSITY`, or "not true / correct / accurate") after the
    value with no new statement between ("Rumours that … 48 months are false"), or before
    it with "that" between ("It is not true that …"), or a leading label ("Myth: …")."""
    end_match = _TERMINATOR.search(text, start)
    end = end_match.start() if end_match else len(text)
    label = _LABEL.match(text, begin)
    if label and label.end() <= start and set(_words(label.group(1), 0, 99)) & FALSITY:
        return True
    ruled = end_match is not None and _ruled_false(text, end_match.end())
    if ruled or _disowned(text, begin, start):
        return True
    words = [
        (m.group().lower().replace("’", "'"), m.start()) for m in _WORD.finditer(text, begin, end)
    ]
    for i, (w, at) in enumerate(words):
        positive = w in _TRUTH
        if w not in FALSITY and not positive:
            continue
        before = [v for v, _ in words[max(0, i - 3) : i] if v not in _FILLERS]
        negated = any(_is_negation(v) for v in before)
        if not before or (before[-1] not in COPULAS and not _is_negation(before[-1])):
            continue
        if positive != negated:  # "is false", "is not true"; not "is not false", "is true"
            continue
        between = text[start:at] if at > start else text[at:start]
        if at > start and not _NEW_STATEMENT.search(between):
            return True
        if at > start and _subject(words, i) in ANAPHORS:  # "…, but this is wrong"
            return True
        that = re.search(r"\bthat\b", between)
        if at < start and that and not _NEW_STATEMENT.search(between, that.end()):
            return True
    return False


def _subject(words: Sequence[tuple[str, int]], i: int) -> str:
    """The word before the copula that leads to ``words[i]`` ("this" in "this is not true")."""
    for j in range(i - 1, max(-1, i - 4), -1):
        if words[j][0] in COPULAS:
            return words[j - 1][0] if j > 0 else ""
    return ""


def _disowned(text: str, begin: int, start: int) -> bool:
    """Before the value in its sentence: a disowning verb or adverb not itself negated ("We
    deny that …", "It was wrongly reported that …"; not "We do not deny that …") or "it is
    not the case that", then "that" and no new statement up to the value."""
    heads = [m.start() for m in _NOT_THE_CASE.finditer(text, begin, start)]
    for m in _WORD.finditer(text, begin, start):
        if m.group().lower() in DISOWNING:
            lead = _words(text, begin, m.start())[-3:]
            if not any(_is_negation(v) for v in lead):
                heads.append(m.start())
    for at in heads:
        that = re.search(r"\bthat\b", text[at:start])
        if that and not _NEW_STATEMENT.search(text[at:start], that.end()):
            return True
    return False


def _ruled_false(text: str, after: int) -> bool:
    """Does the sentence from ``after`` open with a ruling label that says false ("Verdict:
    false")?"""
    m = _RULING.match(text, after)
    return m is not None and m.group(1).lower() in RULING_LABELS and m.group(2).lower() in FALSITY


def _supposed(text: str, begin: int, start: int) -> bool:
    """Is the value in a clause that supposes or asks ("If … 48 months, …", "Customers ask
    whether …", "Imagine that …")? A conditional counts only at the head of its clause."""
    words = _words(text, _clause_start(text, begin, start), start)
    for i, w in enumerate(words):
        if w in SUPPOSITIONS:
            return True
        if w in CONDITIONALS and all(v in CONDITIONAL_LEADS for v in words[:i]):
            return True
    return False


def _instructed(text: str, begin: int, start: int) -> bool:
    """Is the value said on instruction: a speech verb in the imperative ("tell them
    that …", "When asked, answer that …") or after a modal ("agents should say …")?"""
    clause = begin
    for m in _ANY_WORD.finditer(text, begin, start):
        w = m.group().lower().replace("’", "'")
        if w in ",:;" or w in _NEW_CLAUSE:
            clause = m.end()
            continue
        if w not in SPEECH_VERBS and w not in SPEECH_VERBS_MARKED:
            continue
        after = text[m.end() : start]
        if w in SPEECH_VERBS_MARKED and not _MARKED.match(after):
            continue
        lead = _words(text, clause, m.start())
        if all(v in IMPERATIVE_LEADS for v in lead) or (lead and lead[-1] in MODALS):
            return True
    return False


def stance(text: str, start: int, *, negation: bool = True) -> Stance:
    """How ``text`` holds the value starting at ``start`` (see the module docstring);
    ``negation`` False leaves the negation window out (the caller reads negation its own
    way: :mod:`guards.rules.framing`)."""
    begin = _sentence_start(text, start)
    if _falsified(text, begin, start) or (negation and denied(text, start)):
        return "denied"
    if (
        _quoted(text, begin, start)
        or _asked(text, start)
        or _instructed(text, begin, start)
        or _supposed(text, begin, start)
    ):
        return "mentioned"
    return "asserted"
