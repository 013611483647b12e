"""Periods as values: "every year", "every 3 months", "each decade", "annually".

A period without a number is a value for the rules ("every year" against "every 3 months"
is a mismatch, issue 40); :func:`with_period` marks a counted period ("every 3 months") so
a correction keeps its "every".
"""

from __future__ import annotations

import dataclasses
import re

from groundproxy.guards.rules.quantity import Quantity
from groundproxy.guards.rules.units import UNITS

# a period without a number: "every year" is 1 year, "annually" too (issue 40: "every year"
# against "every 3 months" is a value for the rules); an adverb that can be an adjective
# ("monthly fee", "the Daily Mail") counts only where a clause or a prepositional phrase
# follows it, and only in lower case
_EVERY_UNIT = re.compile(
    r"\b(?:every|each)\s+(second|minute|hour|day|week|fortnight|month|year|decade)\b", re.I
)
PERIOD_ADVERBS: dict[str, tuple[float, str]] = {
    "hourly": (1.0, "hour"), "daily": (1.0, "day"), "weekly": (1.0, "week"),
    "fortnightly": (1.0, "fortnight"), "monthly": (1.0, "month"), "quarterly": (3.0, "month"),
    "yearly": (1.0, "year"), "annually": (1.0, "year"),
}  # fmt: skip
_ADVERB = re.compile(
    r"\b(" + "|".join(PERIOD_ADVERBS) + r")\b(?=\s*(?:[.,;:!?)]|$)|\s+(?:and|or|but|for|at|in|on|"
    r"with|from|to|by|during|until|unless|if|when|before|after|thereafter)\b)"
)
_PERIOD_LEAD = re.compile(r"\b(?:every|each)\s+$", re.I)


def period_quantities(text: str, taken: list[tuple[int, int]]) -> list[Quantity]:
    out: list[Quantity] = []
    for m in _EVERY_UNIT.finditer(text):
        s, e = m.span(1)
        if any(s < te and ts < e for ts, te in taken):
            continue
        unit = m.group(1).lower()
        value = 10.0 if unit == "decade" else 1.0
        unit = "year" if unit == "decade" else unit
        word = m.group(1)
        out.append(Quantity(value, "number", unit, word, word, (s, e), period_start=m.start()))
        taken.append((s, e))
    for m in _ADVERB.finditer(text):
        s, e = m.span(1)
        if any(s < te and ts < e for ts, te in taken):
            continue
        value, unit = PERIOD_ADVERBS[m.group(1)]
        out.append(Quantity(value, "number", unit, m.group(1), m.group(1), (s, e)))
        taken.append((s, e))
    return out


def with_period(text: str, q: Quantity) -> Quantity:
    """``q`` with ``period_start`` set where "every" / "each" stands right before it."""
    if q.period_start >= 0 or q.kind != "number" or q.unit not in UNITS:
        return q
    lead = _PERIOD_LEAD.search(text, max(0, q.span[0] - 8), q.span[0])
    return dataclasses.replace(q, period_start=lead.start()) if lead else q
