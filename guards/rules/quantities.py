"""Numbers, amounts, percentages, years and dates in a text, with their unit or noun.

``extract_quantities("The warranty lasts 24 months.")`` gives one :class:`Quantity`:
value 24.0, unit "month", surface "24", display "24 months". Recognized forms: integers
and decimals ("1,000", "1.5"), scale suffixes and words ("1k", "$1.5M", "3 million"),
percentages ("12%", "12 percent"), money ("$12", "€5", "12 dollars"), years, dates
("March 3, 2021", "3 March 2021", "2021-03-03", "March 2021", "March 3") and number
words — whole phrases, "one thousand", "twenty-four", "one hundred and twenty" — followed
by a noun ("twelve months", "one thousand people"), or carrying a scale word on their own
("two million"). A lone "one" counts only before a unit of measure ("one year"; not "one
of", "one day he left"). Ordinals ("3rd") and digits glued to letters ("4G", "B2B") are
not quantities.

A bare number's noun is the head of its phrase: the first plural among the next three
words before a stop word ("Two FBI agents" counts agents, "3 new cases were" cases), and a
partitive counts its whole's noun ("Seventeen of the 30 counts": 17 counts; the 30 is
marked ``whole``, a count of another set, so a correction prefers the part).

Units of measure are converted (:data:`UNITS`): "12 months" = "1 year" = "one year",
"90 minutes" = "1.5 hours", "5 km" = "5,000 meters"; months/years and days/weeks are
compared within 3% of each other ("30 days" ≈ "1 month", "52 weeks" ≈ "1 year"), every
other pair exactly. A value and its unit are one *slot*: quantities compare (and a
mismatch can correct) only within a dimension (time, length, mass, data size) or the
same noun ("3 parts" vs "5 parts").

Why hand-written and not a library: we need exact character spans of the value and of
value+unit (a correction substitutes them in the claim's own words), a year/date/money
/percent distinction, and a few microseconds per sentence inside a latency budget.
quantulum3 (the maintained extractor) and word2number (number words; unmaintained since
2017) were considered: quantulum3 would replace this module's number and unit parsing but
not its dates and brings its own dependencies (inflect, num2words) and a per-call cost that
is not budgeted for yet; dates stay ours as dateparser parses one date string, it does
not find dates in running text with their offsets. This module stays small and is
covered by tests/guards/test_rules.py.
"""

from __future__ import annotations

import itertools
import re

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from groundproxy.guards.rules.lexicon import CURRENCY_WORDS, MONTHS, NUMBER_WORDS, SCALES
from groundproxy.guards.rules.periods import period_quantities, with_period
from groundproxy.guards.rules.quantity import Quantity as Quantity
from groundproxy.guards.rules.quantity import QuantityKind as QuantityKind
from groundproxy.guards.rules.units import (
    GLUED_UNITS,
    MEASURES,
    UNITS,
)

_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)"
)
_DATE_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), "ymd"),
    (re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"), "mdy"),
    (
        re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})\b"),
        "dmy",
    ),
    (re.compile(rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b"), "my"),
    (re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?![\d,.]*\d)"), "md"),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\b\.?"), "dm"),
]
_MONEY = re.compile(
    r"(?<![\w$€£¥])([$€£¥])\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
    r"(?:(k|K|m|M|bn|BN|b|B)\b|\s?(thousand|million|billion|trillion)\b)?"
)
_NUMBER = re.compile(
    r"(?<![0-9A-Za-z_.,:$€£¥])(?<![A-Za-z]-)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
    r"(?:(k|K|m|M|bn|BN)\b|\s?(thousand|million|billion|trillion)\b)?"
    r"(?!\.\d)(?!:\d)(?![A-Za-z])"
)
_WORD_VALUES: dict[str, float] = {"one": 1.0, **{k: float(v) for k, v in NUMBER_WORDS.items()}}
_WORD_SCALES = {"hundred": 100.0, "thousand": 1e3, "million": 1e6, "billion": 1e9,
                "trillion": 1e12}  # fmt: skip
_NW = "|".join(sorted({*_WORD_VALUES, *_WORD_SCALES}, key=len, reverse=True))
_NUMBER_WORD = re.compile(
    rf"\b(?:{_NW})(?:(?:-|\s+|\s+and\s+)(?:{_NW}))*\b",
    re.IGNORECASE,
)
# a clock time ("15:00", "9:30"): one quantity, minutes past midnight, unit "clock"
_CLOCK = re.compile(r"(?<![\d:.,])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_PERCENT_AFTER = re.compile(r"\s?(?:%|percent\b|per\s+cent\b)", re.IGNORECASE)
_UNIT_AFTER = re.compile(r"(?:-|\s+)([^\W\d_](?:[^\W\d_]|\.)*)")
_NEXT_WORD = re.compile(r"\s+([^\W\d_][^\W\d_'’]*)\b")
_PARTITIVE = re.compile(
    rf"\s+of\s+(?:the\s+)?(?:\d[\d,]*(?:\.\d+)?|(?:{_NW})(?:[-\s]+(?:{_NW}))*)\b", re.IGNORECASE
)
_PART_BEFORE = re.compile(rf"(?:\d|\b(?:{_NW}))\s+of\s+(?:the\s+)?$", re.IGNORECASE)
COUNTED_WORDS = 3  # words after a bare number read for the noun it counts
_GLUED = re.compile("|".join(sorted(GLUED_UNITS, key=len, reverse=True)))
_TIME_UNITS = {"am": "am", "a.m.": "am", "a.m": "am", "pm": "pm", "p.m.": "pm", "p.m": "pm"}
_NOT_UNITS = ENGLISH_STOP_WORDS | {"per"}


def _singular(word: str) -> str:
    w = word.lower().rstrip(".")
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def _plural(word: str) -> bool:
    return word != _singular(word) and not word.endswith("ss")


def _counted_noun(text: str, first: str, end: int) -> tuple[str, int]:
    """The noun a bare number counts, when its first word (``first``, ending at ``end``) is
    not a unit: the head of the phrase — the first plural among the next words of the same
    phrase, up to a stop word ("Two FBI agents" → agent, "3 new cases were" → case) — else
    ``first`` itself."""
    low = first.lower()
    if _plural(low) or low in UNITS or low in MEASURES:
        return _singular(first), end  # "70 mph winds": a unit of measure stays the unit
    at = end
    for m in itertools.islice(_NEXT_WORD.finditer(text, end), COUNTED_WORDS - 1):
        if m.start() != at:
            break  # the phrase ends: punctuation or a number between
        word = m.group(1).lower()
        if word in _NOT_UNITS or word in UNITS or word in CURRENCY_WORDS:
            break
        if _plural(word):
            return _singular(word), m.end()
        at = m.end()
    return _singular(first), end


def _partitive(text: str, pos: int) -> str:
    """The noun of "N of (the) M nouns" ("Seventeen of the 30 counts" → count), or ""."""
    m = _PARTITIVE.match(text, pos)
    if not m:
        return ""
    unit, _ = _unit_after(text, m.end(), partitive=False)
    return unit if unit not in ("", "$", "€", "£", "¥", "am", "pm") else ""


def _unit_after(text: str, pos: int, partitive: bool = True) -> tuple[str, int]:
    """(normalized unit, end offset) of the noun right after a number, or ("", pos): a unit
    of measure or currency as written, else the noun counted (:func:`_counted_noun`; a
    partitive's noun — "Seventeen of the 30 counts" — with the end left at the number)."""
    tm = re.match(r"\s?(a\.m\.|p\.m\.|a\.m|p\.m|am|pm)\b", text[pos:], re.IGNORECASE)
    if tm:
        return _TIME_UNITS[tm.group(1).lower()], pos + tm.end()
    g = _GLUED.match(text, pos)
    if g:
        return GLUED_UNITS[g.group()], g.end()
    m = _UNIT_AFTER.match(text, pos)
    if not m:
        return "", pos
    word = m.group(1).rstrip(".")
    low = word.lower()
    if low in CURRENCY_WORDS:
        return CURRENCY_WORDS[low], m.start(1) + len(word)
    if low in _NOT_UNITS or low in SCALES:
        return (_partitive(text, pos) if partitive and low == "of" else ""), pos
    return _counted_noun(text, word, m.start(1) + len(word))


def _to_float(digits: str, decimals: str | None, suffix: str | None, scale: str | None) -> float:
    value = float(digits.replace(",", "") + (decimals or ""))
    if suffix:
        value *= SCALES[suffix.lower()]
    if scale:
        value *= SCALES[scale.lower()]
    return value


_DURATION_LEAD = re.compile(
    r"(?:for|within|in|after|of|than|lasts?|lasted|takes?|took|about|only|just|over|under)"
    r"\s+$",
    re.IGNORECASE,
)


def _idiom(text: str, start: int, unit: str) -> bool:
    """ "one day" / "one time" without a duration word before it ("One day he left")."""
    return unit == "day" and not _DURATION_LEAD.search(text, max(0, start - 12), start)


def _word_phrase(phrase: str) -> tuple[float, str, bool] | None:
    """Value of a number-word phrase ("one hundred and twenty"), the part of the phrase
    that was used (a dangling "and" is not), and whether it carries a scale word."""
    tokens = re.findall(r"[A-Za-z]+|[^A-Za-z]+", phrase)
    total, current, used, scaled, seen = 0.0, 0.0, 0, False, False
    for i, tok in enumerate(tokens):
        low = tok.lower()
        if not tok.isalpha() or low == "and":
            continue
        if low in _WORD_SCALES:
            if not seen:
                return None  # "hundred" / "thousand" alone: "thousands of …"
            scale = _WORD_SCALES[low]
            if scale == 100.0:
                current = (current or 1.0) * 100.0
            else:
                total += (current or 1.0) * scale
                current = 0.0
            scaled = True
        else:
            current += _WORD_VALUES[low]
        seen = True
        used = i + 1
    if not seen:
        return None
    return total + current, "".join(tokens[:used]), scaled


def _dates(text: str, taken: list[tuple[int, int]]) -> list[Quantity]:
    out: list[Quantity] = []
    for pattern, form in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            g = m.groups()
            if form == "ymd":
                y, mo, d = int(g[0]), int(g[1]), int(g[2])
            elif form == "mdy":
                y, mo, d = int(g[2]), MONTHS[g[0].lower()], int(g[1])
            elif form == "dmy":
                y, mo, d = int(g[2]), MONTHS[g[1].lower()], int(g[0])
            elif form == "dm":
                y, mo, d = 0, MONTHS[g[1].lower()], int(g[0])
            elif form == "my":
                y, mo, d = int(g[1]), MONTHS[g[0].lower()], 0
            else:
                y, mo, d = 0, MONTHS[g[0].lower()], int(g[1])
            if not (1 <= mo <= 12 and 0 <= d <= 31):
                continue
            if y and d:
                value = f"{y:04d}-{mo:02d}-{d:02d}"
            elif y:
                value = f"{y:04d}-{mo:02d}"
            else:
                value = f"--{mo:02d}-{d:02d}"
            surface = m.group(0).rstrip(",. ")
            span = (m.start(), m.start() + len(surface))
            out.append(Quantity(value, "date", "", surface, surface, span))
            taken.append(span)
    return out


def extract_quantities(text: str) -> list[Quantity]:
    """Every quantity in ``text``, in order of position (see the module docstring)."""
    taken: list[tuple[int, int]] = []
    found = _dates(text, taken)

    def free(s: int, e: int) -> bool:
        return not any(s < te and ts < e for ts, te in taken)

    for m in _CLOCK.finditer(text):
        if free(m.start(), m.end()):
            minutes = float(int(m.group(1)) * 60 + int(m.group(2)))
            found.append(Quantity(minutes, "number", "clock", m.group(0), m.group(0), m.span()))
            taken.append(m.span())

    for m in _MONEY.finditer(text):
        if not free(m.start(), m.end()):
            continue
        value = _to_float(m.group(2), m.group(3), m.group(4), m.group(5))
        surface = m.group(0)
        found.append(Quantity(value, "money", m.group(1), surface, surface, m.span()))
        taken.append(m.span())

    for m in _NUMBER.finditer(text):
        if not free(m.start(), m.end()):
            continue
        value = _to_float(m.group(1), m.group(2), m.group(3), m.group(4))
        surface = m.group(0)
        pm = _PERCENT_AFTER.match(text, m.end())
        if pm:
            display = text[m.start() : pm.end()]
            found.append(Quantity(value, "percent", "%", surface, display, m.span()))
            taken.append((m.start(), pm.end()))
            continue
        unit, unit_end = _unit_after(text, m.end())
        if unit == "year" and text[m.end() : unit_end] == "年" and len(m.group(1)) == 4:
            unit, unit_end = "", m.end()  # "2020年": the year 2020
        kind: QuantityKind = "number"
        if unit in ("$", "€", "£", "¥"):
            kind = "money"
        elif (
            not unit
            and not m.group(2)
            and not m.group(3)
            and not m.group(4)
            and "," not in m.group(1)
            and len(m.group(1)) == 4
            and 1000 <= value <= 2100
        ):
            kind = "year"
        display = text[m.start() : unit_end] if unit else surface
        end = unit_end if unit else m.end()
        whole = _is_whole(text, m.start(), kind, unit)
        found.append(Quantity(value, kind, unit, surface, display, m.span(), end, whole))
        taken.append((m.start(), max(m.end(), unit_end)))

    for m in _NUMBER_WORD.finditer(text):
        if not free(m.start(), m.end()):
            continue
        phrase = _word_phrase(m.group(0))
        if phrase is None:
            continue
        value, words, scaled = phrase
        surface = m.group(0)[: len(words)]
        s_end = m.start() + len(surface)
        unit, unit_end = _unit_after(text, s_end)
        if surface.lower() == "one" and (unit not in UNITS or _idiom(text, m.start(), unit)):
            continue  # "one of them", "one day he left": not a measurement
        if not unit and not scaled:
            continue  # "two of them": too idiomatic to demand evidence for
        kind = "money" if unit in ("$", "€", "£", "¥") else "number"
        end = unit_end if unit else s_end
        span = (m.start(), s_end)
        whole = _is_whole(text, m.start(), kind, unit)
        found.append(Quantity(value, kind, unit, surface, text[m.start() : end], span, end, whole))
        taken.append((m.start(), end))
    found.extend(period_quantities(text, taken))
    found = [with_period(text, q) for q in found]
    found.sort(key=lambda q: q.span)
    return found


def _is_whole(text: str, start: int, kind: QuantityKind, unit: str) -> bool:
    """Is the count at ``start`` the M of a partitive "N of (the) M nouns"?"""
    return (
        kind == "number"
        and bool(unit)
        and bool(_PART_BEFORE.search(text, max(0, start - 60), start))
    )
