"""Units of measure the quantity parser knows (:mod:`groundproxy.guards.rules.quantities`).

:data:`UNITS` maps a unit, singular as the parser leaves it, to its dimension and its size
in the dimension's base unit (seconds, meters, kilograms, bytes), in English and the other
languages answers arrive in; :data:`GLUED_UNITS` are written right after the number, without
a space; :data:`MEASURES` are units not converted that a number's counted noun must not skip
over ("70 mph winds" measures mph, it does not count winds).
"""

from __future__ import annotations

# units of measure not converted (UNITS) that a number's noun must not skip over
_MEASURE_WORDS = (
    "psi knot knots ppm ppb rpm bpm mpg mph kph kmh kwh kw mw gw hz khz mhz ghz db dba cc ml "
    "cl dl mg mcg µg ng nm µm mmhg kpa mpa hpa bps kbps mbps gbps fps dpi px oz pint gallon "
    "qt tsp tbsp bbl yd sq acre hectare volt watt amp calorie kcal"
)
MEASURES = frozenset(_MEASURE_WORDS.split())

# Units written right after the number, without a space (Japanese, Chinese).
GLUED_UNITS = {"か月": "month", "ヶ月": "month", "カ月": "month", "ヵ月": "month",
               "箇月": "month", "个月": "month", "個月": "month", "年間": "year", "年": "year",
               "週間": "week", "日間": "day", "日": "day", "天": "day", "時間": "hour",
               "小时": "hour", "分間": "minute", "分钟": "minute", "秒": "second"}  # fmt: skip

# unit (singular, as _singular leaves it) → (dimension, size in the dimension's base unit)
_DAY, _YEAR = 86400.0, 365.2425 * 86400.0
UNITS: dict[str, tuple[str, float]] = {
    **{u: ("time", 1.0) for u in ("second", "sec", "s")},
    **{u: ("time", 60.0) for u in ("minute", "min")},
    **{u: ("time", 3600.0) for u in ("hour", "hr", "h")},
    "day": ("time", _DAY), "week": ("time", 7 * _DAY), "fortnight": ("time", 14 * _DAY),
    **{u: ("time", _YEAR / 12) for u in ("month", "mo")},
    **{u: ("time", _YEAR) for u in ("year", "yr", "y")},
    # other languages (singular as _singular leaves them): de, fr, es, it, pt, nl
    **{u: ("time", _YEAR / 12) for u in ("monat", "monate", "monaten", "mois", "mes", "mese",
                                         "mesi", "meses", "maand", "maanden")},
    **{u: ("time", _YEAR) for u in ("jahr", "jahre", "jahren", "ans", "année", "año", "ano",
                                    "anni", "anno", "jaar", "jaren")},
    **{u: ("time", _DAY) for u in ("tag", "tage", "tagen", "jour", "día", "dia", "giorni",
                                   "giorno", "dag", "dagen")},
    **{u: ("time", 7 * _DAY) for u in ("woche", "wochen", "semaine", "semana", "settimana",
                                       "settimane", "week", "weken")},
    **{u: ("time", 3600.0) for u in ("stunde", "stunden", "heure", "hora", "ore", "uur")},
    "decade": ("time", 10 * _YEAR), "century": ("time", 100 * _YEAR),
    **{u: ("length", 1e-3) for u in ("millimeter", "millimetre", "mm")},
    **{u: ("length", 1e-2) for u in ("centimeter", "centimetre", "cm")},
    **{u: ("length", 1.0) for u in ("meter", "metre", "m")},
    **{u: ("length", 1e3) for u in ("kilometer", "kilometre", "km")},
    **{u: ("length", 0.0254) for u in ("inch", "inche", "in")},
    **{u: ("length", 0.3048) for u in ("foot", "feet", "ft")},
    **{u: ("length", 1609.344) for u in ("mile", "mi")},
    **{u: ("mass", 1e-3) for u in ("gram", "gramme", "g")},
    **{u: ("mass", 1.0) for u in ("kilogram", "kilo", "kg")},
    **{u: ("mass", 1e3) for u in ("tonne", "ton")},
    **{u: ("mass", 0.45359237) for u in ("lb", "lbs")},
    **{u: ("data", 1e3) for u in ("kilobyte", "kb")},
    **{u: ("data", 1e6) for u in ("megabyte", "mb")},
    **{u: ("data", 1e9) for u in ("gigabyte", "gb")},
    **{u: ("data", 1e12) for u in ("terabyte", "tb")},
}  # fmt: skip
# Calendar units (month, year …) against day-based ones (day, week …): equal within this.
CALENDAR = {u for u, (dim, size) in UNITS.items() if dim == "time" and size >= _YEAR / 12}
CROSS_CALENDAR_TOLERANCE = 0.03
