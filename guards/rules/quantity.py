"""One value found in a text (:class:`Quantity`): its kind, unit, spans, and how two compare.

Found by :func:`guards.rules.quantities.extract_quantities` (numbers, dates, amounts) and
:func:`guards.rules.periods.period_quantities` ("every year", "annually").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from groundproxy.guards.rules.units import CALENDAR, CROSS_CALENDAR_TOLERANCE, UNITS

QuantityKind = Literal["number", "percent", "money", "year", "date"]


@dataclass(frozen=True)
class Quantity:
    value: float | str  # a float, or "YYYY[-MM[-DD]]" / "--MM-DD" for dates
    kind: QuantityKind
    unit: str  # normalized unit or noun: "month", "%", "$", "" when none
    surface: str  # the value as written: "24", "$12", "March 3, 2021"
    display: str  # value and unit as written: "24 months", "12-month", "$12"
    span: tuple[int, int]  # of ``surface``
    display_end: int = -1  # end of ``display`` (it starts at span[0]); -1: span[1]
    whole: bool = False  # the M of a partitive "N of the M nouns": a count of another set
    # a period: where its "every" / "each" starts ("every 3 months", "every year"); -1: none
    period_start: int = -1

    @property
    def display_span(self) -> tuple[int, int]:
        return self.span[0], self.span[1] if self.display_end < 0 else self.display_end

    def base_value(self) -> float | None:
        """The value in its dimension's base unit (seconds, meters …), when it has one."""
        dim = UNITS.get(self.unit)
        if dim is None or not isinstance(self.value, float) or self.kind != "number":
            return None
        return self.value * dim[1]

    def same_value(self, other: Quantity) -> bool:
        """Equal values (converted when both have a unit of measure); a year matches a
        date in that year, a month a day in it."""
        a, b = self.value, other.value
        ba, bb = self.base_value(), other.base_value()
        if ba is not None and bb is not None and self.unit_key() == other.unit_key():
            tol = 1e-9
            if (self.unit in CALENDAR) != (other.unit in CALENDAR):
                tol = CROSS_CALENDAR_TOLERANCE
            return abs(ba - bb) <= tol * max(abs(ba), abs(bb), 1e-12)
        if isinstance(a, float) and isinstance(b, float):
            return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)
        sa = str(int(a)) if isinstance(a, float) and a.is_integer() else str(a)
        sb = str(int(b)) if isinstance(b, float) and b.is_integer() else str(b)
        if sa.startswith("--") != sb.startswith("--"):  # "July 12" is any year's July 12
            return sa[-6:] == sb[-6:] and len(min(sa, sb, key=len)) == 7 and "--" in sa + sb
        return sa == sb or sb.startswith(sa + "-") or sa.startswith(sb + "-")

    def unit_key(self) -> str:
        if self.kind in ("year", "date"):
            return "<date>"
        if self.kind == "percent":
            return "%"
        dim = UNITS.get(self.unit)
        if dim is not None and self.kind == "number":
            return f"<{dim[0]}>"
        return self.unit
