"""Bounded values: the words of a bound go with the value a correction replaces.

A claim's number written with a bound ("more than 30,000 claims", "under 2 years") is
corrected, when the evidence states another value of its slot, to the evidence's value
without the bound: "TSA received more than 30,000 claims" against "30,621 claims" becomes
"TSA received 30,621 claims" — before, "more than 30,621 claims", which the evidence
does not say either.

==================================================================  ==========
words right before the value                                        bound
==================================================================  ==========
more than, over, above, at least, in excess of, upwards of          at_least
less than, fewer than, under, below, at most, up to                 at_most
==================================================================  ==========

Measured and NOT adopted: reading a bound the evidence meets as support (30,621 admitted
by "more than 30,000"). Over the 13 TRAIN files (rule level, the whole context as
evidence) it cleared the rule findings of 19 right answers and of 17 hallucinated ones
(HaluEval-QA: 4 hallucinated, 0 right; summedits 3 hallucinated); a tolerance for hedges
("about 10 million" for 11 million, 10 %) cleared 7 more hallucinated answers. The
benchmarks' labels call many logically true bounds wrong, so that reading is left to the
verifier. Dates and years carry no bound ("over 2010").
"""

from __future__ import annotations

import re
from typing import Literal

from groundproxy.guards.rules.quantities import Quantity

Bound = Literal["at_least", "at_most"]

_BEFORE = re.compile(
    r"\b(?:(?P<at_least>more\s+than|over|above|at\s+least|in\s+excess\s+of|upwards\s+of)"
    r"|(?P<at_most>less\s+than|fewer\s+than|under|below|at\s+most|up\s+to))"
    r"\s*[$€£¥]?\s*$",
    re.IGNORECASE,
)
_LOOK_BACK = 24  # characters before the value searched for the bound's words


def bound_of(text: str, q: Quantity) -> tuple[Bound, int] | None:
    """The bound written right before ``q`` in ``text`` and where its words start, or None
    (an exact value)."""
    if q.kind in ("year", "date") or not isinstance(q.value, float):
        return None
    start = max(0, q.span[0] - _LOOK_BACK)
    m = _BEFORE.search(text[start : q.span[0]])
    if m is None:
        return None
    kind: Bound = "at_least" if m.group("at_least") else "at_most"
    return kind, start + m.start()
