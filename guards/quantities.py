"""Numbers, amounts, percentages, years and dates in a text, with their unit or noun.

``extract_quantities("The warranty lasts 24 months.")`` gives one :class:`Quantity`:
value 24.0, unit "month", surface "24", display "24 months". Recognized forms: integers
and decimals ("1,000", "1.5"), scale suffixes and words ("1k", "$1.5M", "3 million"),
percentages ("12%", "12 percent"), money ("$12", "€5", "12 dollars"), years, dates
("March 3, 2021", "3 March 2021", "2021-03-03", "March 2021", "March 3") and number
words followed by a noun ("twelve months", "twenty-four hours"). Ordinals ("3rd") and
digits glued to letters ("4G", "B2B") are not quantities.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from guards.lexicon import CURRENCY_WORDS, MONTHS, NUMBER_WORDS, SCALES

QuantityKind = Literal["number", "percent", "money", "year", "date"]

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
]
_MONEY = re.compile(
    r"(?<![\w$€£¥])([$€£¥])\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
    r"(?:(k|K|m|M|bn|BN|b|B)\b|\s?(thousand|million|billion|trillion)\b)?"
)
_NUMBER = re.compile(
    r"(?<![\w.,:$€£¥])(?<![A-Za-z]-)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
    r"(?:(k|K|m|M|bn|BN)\b|\s?(thousand|million|billion|trillion)\b)?"
    r"(?!\.\d)(?!:\d)(?![A-Za-z])"
)
_NUMBER_WORD = re.compile(
    r"\b(" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")"
    r"(?:-(one|two|three|four|five|six|seven|eight|nine))?\b",
    re.IGNORECASE,
)
_PERCENT_AFTER = re.compile(r"\s?(?:%|percent\b|per\s+cent\b)", re.IGNORECASE)
_UNIT_AFTER = re.compile(r"(?:-|\s+)([A-Za-z][A-Za-z.]*)")
_ONES = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
         "eight": 8, "nine": 9}  # fmt: skip
_TIME_UNITS = {"am": "am", "a.m.": "am", "a.m": "am", "pm": "pm", "p.m.": "pm", "p.m": "pm"}
_NOT_UNITS = ENGLISH_STOP_WORDS | {"per"}


@dataclass(frozen=True)
class Quantity:
    value: float | str  # a float, or "YYYY[-MM[-DD]]" / "--MM-DD" for dates
    kind: QuantityKind
    unit: str  # normalized unit or noun: "month", "%", "$", "" when none
    surface: str  # the value as written: "24", "$12", "March 3, 2021"
    display: str  # value and unit as written: "24 months", "12-month", "$12"
    span: tuple[int, int]  # of ``surface``

    def same_value(self, other: Quantity) -> bool:
        """Equal values; a year matches a date in that year, a month a day in it."""
        a, b = self.value, other.value
        if isinstance(a, float) and isinstance(b, float):
            return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)
        sa = str(int(a)) if isinstance(a, float) and a.is_integer() else str(a)
        sb = str(int(b)) if isinstance(b, float) and b.is_integer() else str(b)
        return sa == sb or sb.startswith(sa + "-") or sa.startswith(sb + "-")

    def unit_key(self) -> str:
        if self.kind in ("year", "date"):
            return "<date>"
        if self.kind == "percent":
            return "%"
        return self.unit


def _singular(word: str) -> str:
    w = word.lower().rstrip(".")
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def _unit_after(text: str, pos: int) -> tuple[str, int]:
    """(normalized unit, end offset) of the noun right after a number, or ("", pos)."""
    tm = re.match(r"\s?(a\.m\.|p\.m\.|a\.m|p\.m|am|pm)\b", text[pos:], re.IGNORECASE)
    if tm:
        return _TIME_UNITS[tm.group(1).lower()], pos + tm.end()
    m = _UNIT_AFTER.match(text, pos)
    if not m:
        return "", pos
    word = m.group(1).rstrip(".")
    low = word.lower()
    if low in CURRENCY_WORDS:
        return CURRENCY_WORDS[low], m.start(1) + len(word)
    if low in _NOT_UNITS or low in SCALES:
        return "", pos
    return _singular(low), m.start(1) + len(word)


def _to_float(digits: str, decimals: str | None, suffix: str | None, scale: str | None) -> float:
    value = float(digits.replace(",", "") + (decimals or ""))
    if suffix:
        value *= SCALES[suffix.lower()]
    if scale:
        value *= SCALES[scale.lower()]
    return value


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
        found.append(Quantity(value, kind, unit, surface, display, m.span()))
        taken.append((m.start(), max(m.end(), unit_end)))

    for m in _NUMBER_WORD.finditer(text):
        if not free(m.start(), m.end()):
            continue
        unit, unit_end = _unit_after(text, m.end())
        if not unit:
            continue  # "two of them": too idiomatic to demand evidence for
        value = float(NUMBER_WORDS[m.group(1).lower()] + _ONES.get((m.group(2) or "").lower(), 0))
        kind = "money" if unit in ("$", "€", "£", "¥") else "number"
        found.append(Quantity(value, kind, unit, m.group(0), text[m.start() : unit_end], m.span()))
        taken.append((m.start(), unit_end))
    found.sort(key=lambda q: q.span)
    return found
