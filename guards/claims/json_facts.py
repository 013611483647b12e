"""The number, boolean and date values of a JSON answer, as claims: each is stated as one
line ``<key>: <value>`` (``warranty_months: 24 months`` — a unit the key names goes after the
number, so the value rules compare it with the evidence), and a corrected line gives back a
value of the same JSON type, written in place only where the schema still holds.

Pure logic: no I/O (:mod:`guards.claims.json_claims` uses it).
"""

from __future__ import annotations

import re
from typing import Any

from groundproxy.guards.rules.units import MEASURES, UNITS

Path = tuple[str | int, ...]

# keys whose number names a thing, not a fact about it
_ID_KEYS = frozenset({"id", "idx", "index", "rank", "position", "page", "seed", "version"})
_ID_SUFFIXES = ("_id", "_idx", "_index", "Id", "ID")
# a currency key word, as the value rules read it after a number
_CURRENCIES = {"usd": "dollars", "eur": "euros", "gbp": "pounds", "jpy": "yen", "chf": "francs"}
# units a key names that the value rules read as a number's unit, beside guards.rules.units's
_MORE_UNITS = frozenset({"liter", "liters", "litre", "litres", "mah", "ah", "wh", "kwh", "w", "v"})
_SUBJECT_KEYS = ("name", "title", "product", "model")
_ISO = re.compile(r"(\d{4})-(\d{2})(?:-(\d{2}))?")
_DATE = re.compile(
    r"\d{4}-\d{2}(?:-\d{2})?"
    r"|(?:\d{1,2} )?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
    r"(?: \d{1,2},?)? \d{4}"
)
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")
_KEY_WORDS = re.compile(r"[_\-\s]+|(?<=[a-z])(?=[A-Z])")


def is_date(value: str) -> bool:
    """A date (ISO ``2024-03-01``, ``March 1, 2024`` …) and nothing else."""
    return bool(_DATE.fullmatch(value.strip()))


def is_fact(key: str | int | None, value: Any) -> bool:
    """A number, boolean or date value worth checking (not an id-like number)."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        name = str(key) if key is not None else ""
        return name not in _ID_KEYS and not name.endswith(_ID_SUFFIXES)
    return isinstance(value, str) and is_date(value)


def unit_of(key: str) -> str | None:
    """The unit the key's last word names (``warranty_months`` → ``months``), or None."""
    words = [w for w in _KEY_WORDS.split(key) if w]
    if not words:
        return None
    last = words[-1].lower()
    if last in _CURRENCIES:
        return _CURRENCIES[last]
    singular = last[:-1] if last.endswith("s") else last
    if last in _MORE_UNITS or (len(last) > 1 and (last in UNITS or singular in UNITS)):
        return last
    if last in MEASURES:
        return last
    return "%" if last in ("percent", "pct") else None


def render(value: Any) -> str:
    """A value as the line states it: JSON's spelling for booleans, an ISO date in words
    (``2024-03`` → ``March 2024``: the value rules read dates so)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    iso = _ISO.fullmatch(value) if isinstance(value, str) else None
    if iso and 1 <= int(iso.group(2)) <= 12:
        month = _MONTHS[int(iso.group(2)) - 1]
        day = f" {int(iso.group(3))}," if iso.group(3) else ""
        return f"{month}{day} {iso.group(1)}"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def fact_line(parent: Any, path: Path, value: Any) -> str:
    """``<label>: <value>[ unit]`` for the value at ``path`` (``parent`` holds it): the label
    is its key, after the subject its object names (``name``/``title``/…) or its parent keys."""
    keys = [str(p) for p in path if isinstance(p, str)]
    key = keys[-1] if keys else "value"
    names = [parent.get(k) for k in _SUBJECT_KEYS] if isinstance(parent, dict) else []
    subject = next((n for n in names if isinstance(n, str)), None)
    prefix = subject if subject and len(subject) <= 80 else " ".join(keys[:-1][-2:])
    unit = unit_of(key) if isinstance(value, int | float) and not isinstance(value, bool) else None
    line = f"{key}: {render(value)}" + (f" {unit}" if unit and unit != "%" else unit or "")
    return f"{prefix} {line}".strip() if prefix else line


def corrected_value(original: Any, line: str, correction: str) -> Any:
    """The value a corrected line states, of the original's JSON type; None when the
    correction does not state one (or states the same)."""
    head = line.split(": ", 1)[0]
    said = correction.split(": ", 1)[1] if correction.startswith(head + ": ") else correction
    new: Any = None
    if isinstance(original, bool):
        words = set(re.findall(r"[a-z]+", said.lower()))
        new = True if "true" in words else False if "false" in words else None
    elif isinstance(original, int | float):
        found = _NUMBER.search(said)
        if found:
            number = float(found.group().replace(",", ""))
            keep_int = isinstance(original, int) and number.is_integer()
            new = int(number) if keep_int else number
    elif isinstance(original, str):
        found = _DATE.search(said)
        new = _same_style(original, found.group()) if found else None
    return None if new is None or new == original else new


_MONTH_STYLES = ("%B %d, %Y", "%B %d %Y", "%d %B %Y", "%b %d, %Y", "%b %d %Y", "%d %b %Y",
                 "%B %Y", "%b %Y")  # fmt: skip


def _same_style(original: str, new: str) -> str:
    """``new`` written as ``original`` is (an ISO date stays ISO: ``March 1, 2022`` →
    ``2022-03-01``), as found otherwise; the original itself when ``new`` names no day and
    the original does (a day would be made up)."""
    from datetime import datetime

    iso = _ISO.fullmatch(original.strip())
    if not iso:
        return new
    for style in _MONTH_STYLES:
        try:
            when = datetime.strptime(new.replace("Sept", "Sep").rstrip("."), style)
        except ValueError:
            continue
        if iso.group(3) and "%d" not in style:
            return original
        return when.strftime("%Y-%m-%d" if iso.group(3) else "%Y-%m")
    return new


_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "string": (str,),
}
_FITTING_KEYS = frozenset(
    {"type", "description", "title", "examples", "default", "minimum", "maximum", "enum",
     "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"}
)  # fmt: skip


def fits(schema: Any, value: Any) -> bool:
    """Does ``value`` satisfy the (sub-)schema of its field? True with no schema (or
    ``true``, ``{}``: the field is not typed); False whenever the schema says something
    this check does not read (never guess)."""
    if schema is None or schema is True:
        return True
    if not isinstance(schema, dict) or not set(schema) <= _FITTING_KEYS:
        return False
    kinds = schema.get("type", list(_TYPES))  # no "type": any type
    names = kinds if isinstance(kinds, list) else [kinds]
    allowed = tuple(t for n in names if isinstance(n, str) for t in _TYPES.get(n, ()))
    if not allowed or not isinstance(value, allowed):
        return False
    if isinstance(value, bool) and bool not in allowed:
        return False  # a bool is an int to Python, never to JSON
    if isinstance(value, int) and not isinstance(value, bool) and int not in allowed:
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    return _in_bounds(schema, value) and _format_holds(schema, value)


def _in_bounds(schema: dict[str, Any], value: Any) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return True
    bound = {k: schema[k] for k in _BOUNDS if isinstance(schema.get(k), int | float)}
    return (
        value >= bound.get("minimum", value)
        and value <= bound.get("maximum", value)
        and ("exclusiveMinimum" not in bound or value > bound["exclusiveMinimum"])
        and ("exclusiveMaximum" not in bound or value < bound["exclusiveMaximum"])
        and (
            "multipleOf" not in bound
            or (bound["multipleOf"] > 0 and float(value / bound["multipleOf"]).is_integer())
        )
    )


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def _format_holds(schema: dict[str, Any], value: Any) -> bool:
    fmt = schema.get("format")
    if fmt is None:
        return True
    if fmt == "date":
        return isinstance(value, str) and bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", value))
    return False
