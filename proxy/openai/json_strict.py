"""Strict JSON for request bodies: what the standard allows and nothing more.

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``-Infinity`` and decodes ``\\ud800`` into
a lone surrogate; neither can be sent on (the upstream client refuses to encode them), so
they used to surface as "upstream returned 500". Here they are the client's error: a 400
that names the field (``temperature``, ``messages.0.content``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from groundproxy.errors import BadRequestError

_SURROGATE = re.compile("[\ud800-\udfff]")


class _NonFinite:
    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def find_bad(data: Any) -> tuple[str, str] | None:
    """``(field path, problem)`` of the first non-standard value (a NaN / Infinity literal,
    a float past the double range, a lone surrogate), or None."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        cur, path = stack.pop()
        if isinstance(cur, _NonFinite):
            return path, f"{cur.literal} is not a valid JSON number"
        if isinstance(cur, float) and not math.isfinite(cur):
            return path, "the number is not finite"
        if isinstance(cur, str) and _SURROGATE.search(cur):
            return path, "the string holds a lone UTF-16 surrogate (not valid Unicode)"
        if isinstance(cur, dict):
            for k, v in reversed(list(cur.items())):
                sub = f"{path}.{k}" if path else str(k)
                if isinstance(k, str) and _SURROGATE.search(k):
                    return path or "(body)", "a key holds a lone UTF-16 surrogate"
                stack.append((v, sub))
        elif isinstance(cur, list):
            stack.extend(
                (v, f"{path}.{i}" if path else str(i)) for i, v in reversed(list(enumerate(cur)))
            )
    return None


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity literals and lone surrogates (400, named)."""
    data = json.loads(text, parse_constant=_NonFinite)
    bad = find_bad(data)
    if bad is not None:
        path, problem = bad
        raise BadRequestError(f"'{path or '(body)'}': {problem}", param=path or None)
    return data
