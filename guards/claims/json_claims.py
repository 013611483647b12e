"""Structured (JSON) answers: the string values that state facts, and the number, boolean
and date values, are the claims, and the JSON itself is never broken.

:func:`parse_json_answer` reads an answer that is JSON (``None`` when it is not);
:func:`statements` lists the string values worth verifying (a few words with letters, not
identifiers, names or enum-like tokens) with their path; a number, boolean or date value is
stated as a line ``key: value`` (:mod:`guards.claims.json_facts`: ``warranty_months: 24 months``).
:func:`claim_text` joins them, in document order, into one text to verify (each a sentence on
its own line, so claims never span two values) and remembers where each starts, so a claim's
span maps back to its value (:meth:`JsonClaims.value_of`).
:func:`edit_values` applies per-value replacements, only to values whose schema (if any) is
a plain string, so the result still validates; a corrected number, boolean or date is
written back with its JSON type where its schema still holds (:func:`json_facts.fits`).
Pure logic: no I/O.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from groundproxy.guards.claims.json_facts import corrected_value, fact_line, fits, is_fact

Path = tuple[str | int, ...]
_MISSING = object()
_PLAIN_STRING_KEYS = {"type", "description", "title", "examples", "default"}


def parse_json_answer(text: str) -> Any:
    """The answer's JSON document (an object or array), or ``None`` when it is not JSON."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        doc = json.loads(stripped)
    except ValueError:
        return None
    return doc if isinstance(doc, dict | list) else None


def _statement(value: str) -> bool:
    words = value.split()
    return len(words) >= 4 and any(ch.isalpha() for ch in value)


def statements(doc: Any, path: Path = ()) -> list[tuple[Path, str]]:
    """Every string value in ``doc`` that reads like a statement, with its path."""
    return [(p, text) for p, text, fact in _leaves(doc, path, None) if fact is _MISSING]


def _leaves(doc: Any, path: Path, parent: Any) -> list[tuple[Path, str, Any]]:
    """``(path, line, fact value)`` of every claim-worthy value, in document order: a
    statement's line is its text (fact ``_MISSING``), a fact's is ``key: value``."""
    if isinstance(doc, dict):
        return [leaf for k, v in doc.items() for leaf in _leaves(v, (*path, str(k)), doc)]
    if isinstance(doc, list):
        return [leaf for i, v in enumerate(doc) for leaf in _leaves(v, (*path, i), doc)]
    if isinstance(doc, str) and _statement(doc):
        return [(path, doc, _MISSING)]
    if path and is_fact(path[-1], doc):
        return [(path, fact_line(parent, path, doc), doc)]
    return []


@dataclass
class JsonClaims:
    """The statements of one JSON answer joined into one text to verify."""

    doc: Any
    leaves: list[tuple[Path, str]]  # (path, the line verified: a statement, or key: value)
    text: str = ""
    starts: list[int] = field(default_factory=list)
    facts: dict[int, Any] = field(default_factory=dict)  # leaf index → its number/bool/date

    def value_of(self, offset: int) -> int | None:
        """The index of the value holding character ``offset`` of :attr:`text`."""
        for i in range(len(self.starts) - 1, -1, -1):
            if offset >= self.starts[i]:
                end = self.starts[i] + len(self.leaves[i][1])
                return i if offset < end else None
        return None


def claim_text(doc: Any) -> JsonClaims:
    """``doc``'s statements and facts, one per line (see the module docstring)."""
    leaves = _leaves(doc, (), None)
    found = JsonClaims(doc, [(p, line) for p, line, _ in leaves])
    found.facts = {i: fact for i, (_, _, fact) in enumerate(leaves) if fact is not _MISSING}
    parts: list[str] = []
    pos = 0
    for _, value in found.leaves:
        found.starts.append(pos)
        piece = value if value.rstrip()[-1:] in ".!?" else value + "."  # one sentence each
        parts.append(piece)
        pos += len(piece) + 1
    found.text = "\n".join(parts)
    return found


# keywords of an object or array schema that say nothing about the value of one field
# beyond its own sub-schema; any other (anyOf, $ref, patternProperties, prefixItems …) might,
# so a field under it is never edited (never guess)
_CONTAINER_KEYS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "description",
     "title", "examples", "default", "minItems", "maxItems", "minProperties", "maxProperties",
     "$schema", "$id"}
)  # fmt: skip


def _schema_at(schema: Any, path: Path) -> Any:
    """The sub-schema for ``path``: a schema, ``None`` when the schema does not type that
    field (JSON Schema lets it hold anything: a key ``properties`` does not list, with
    ``additionalProperties`` absent or ``true``; ``items`` absent; ``{}``), or ``_MISSING``
    when it cannot be read here (a keyword this module does not read, or a key
    ``additionalProperties: false`` forbids)."""
    cur = schema
    for step in path:
        if cur is None or cur is True:
            return None
        if not isinstance(cur, dict) or not set(cur) <= _CONTAINER_KEYS:
            return _MISSING
        if isinstance(step, int):
            cur = cur.get("items")
        else:
            props = cur.get("properties") or {}
            cur = props[step] if step in props else cur.get("additionalProperties")
        if cur is False:
            return _MISSING
    return None if cur is True else cur


def _takes_any_string(sub: Any) -> bool:
    """May a value of this sub-schema be any string?"""
    if sub is None:
        return True
    if not isinstance(sub, dict) or not set(sub) <= _PLAIN_STRING_KEYS:
        return False
    kinds = sub.get("type", "string")
    return kinds == "string" or (isinstance(kinds, list) and "string" in kinds)


def plain_string_field(schema: dict[str, Any] | None, path: Path) -> bool:
    """May the value at ``path`` be replaced by any string and still validate? True with no
    schema, when the schema does not type the field, or when its schema is
    ``{"type": "string"}`` with no other constraint."""
    if schema is None:
        return True
    return _takes_any_string(_schema_at(schema, path))


def _set(doc: Any, path: Path, value: Any) -> None:
    cur = doc
    for step in path[:-1]:
        cur = cur[step]
    cur[path[-1]] = value


def edit_values(
    found: JsonClaims, edits: dict[int, str], schema: dict[str, Any] | None
) -> tuple[Any, list[int]]:
    """A copy of the document with ``edits`` (value index → new text) applied where the
    field is a plain string; returns it and the indexes that were edited."""
    doc = copy.deepcopy(found.doc)
    done: list[int] = []
    for i, value in sorted(edits.items()):
        path = found.leaves[i][0]
        if path and plain_string_field(schema, path):
            _set(doc, path, value)
            done.append(i)
    return doc, done


def pointer(path: Path) -> str:
    """A value's JSON Pointer (RFC 6901): ``("models", 0, "name")`` → ``/models/0/name``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path) or "/"


def response_schema(response_format: Any) -> tuple[bool, dict[str, Any] | None]:
    """``(asks for JSON, its JSON schema or None)`` for a request's ``response_format``."""
    if not isinstance(response_format, dict):
        return False, None
    kind = response_format.get("type")
    if kind == "json_object":
        return True, None
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return True, schema if isinstance(schema, dict) else None
    return False, None


@dataclass
class JsonEdited:
    """The JSON answer after the guard, and the edits the guard asked for that were not
    made: ``(claim result, why)`` for each claim the policy corrected or removed whose
    value stayed as it was (:func:`guards.action.unmade_edits` flags them)."""

    text: str
    unmade: list[tuple[Any, str]] = field(default_factory=list)


def _fact_edit(found: JsonClaims, i: int, r: Any) -> tuple[Any, str]:
    """The new value for fact ``i`` under claim result ``r`` (``_MISSING`` and why not)."""
    where = pointer(found.leaves[i][0])
    if r.action != "corrected" or not r.correction:
        return _MISSING, f"not removed: {where} is a JSON value, kept as it was and flagged"
    new_value = corrected_value(found.facts[i], found.leaves[i][1], r.correction)
    if new_value is None:
        return _MISSING, f"not corrected: the correction states no new value for {where}"
    return new_value, ""


def guarded_json(
    original: str,
    found: JsonClaims,
    claims: list[Any],
    blocked: bool,
    refusal: str,
    schema: dict[str, Any] | None,
) -> JsonEdited:
    """The JSON answer after the guard: corrected / removed claims rewritten inside their
    value, a corrected number, boolean or date replaced by the corrected value (same JSON
    type), and on ``blocked`` every statement value holding a claim replaced by ``refusal``
    — each only where the schema allows it (:func:`plain_string_field`,
    :func:`json_facts.fits`). No markers, no sources: when nothing may be edited, the
    original text is returned byte for byte. Every correction or removal not made is
    listed with its reason (:attr:`JsonEdited.unmade`)."""
    edits: dict[int, list[tuple[int, int, str]]] = {}
    owners: dict[int, list[Any]] = {}  # statement index → the claims editing it
    facts: dict[int, tuple[Any, Any]] = {}  # fact index → (new value, its claim)
    unmade: list[tuple[Any, str]] = []
    for r in claims:
        start, end = r.claim.span
        i = found.value_of(start)
        if i is None:
            continue
        if i in found.facts:
            if not blocked and r.action in ("corrected", "removed"):
                new_value, why = _fact_edit(found, i, r)
                if new_value is _MISSING:
                    unmade.append((r, why))
                else:
                    facts[i] = (new_value, r)
            continue
        if blocked:
            edits[i] = [(0, len(found.leaves[i][1]), refusal)]
            continue
        if r.action not in ("corrected", "removed") or (i in edits and edits[i][0][2] == refusal):
            continue
        base = found.starts[i]
        new = (r.correction or "") if r.action == "corrected" else ""
        edits.setdefault(i, []).append(
            (start - base, min(end - base, len(found.leaves[i][1])), new)
        )
        owners.setdefault(i, []).append(r)
    values: dict[int, str] = {}
    for i, spans in edits.items():
        value = found.leaves[i][1]
        for s, e, new in sorted(spans, reverse=True):
            value = value[:s] + new + value[e:]
        values[i] = " ".join(value.split())
    doc, done = edit_values(found, values, schema)
    for i in sorted(set(owners) - set(done)):
        where = pointer(found.leaves[i][0])
        why = f"not edited: the response schema constrains the string at {where}"
        unmade.extend((r, why) for r in owners[i])
    for i, (new_value, r) in sorted(facts.items(), key=lambda item: item[0]):
        path = found.leaves[i][0]
        sub = None if schema is None else _schema_at(schema, path)
        if sub is not _MISSING and fits(sub, new_value):
            _set(doc, path, new_value)
            done.append(i)
        else:
            shown = json.dumps(new_value, ensure_ascii=False)
            unmade.append((r, f"not corrected: {shown} would break the response schema at "
                              f"{pointer(path)}; flagged instead"))  # fmt: skip
    text = json.dumps(doc, ensure_ascii=False) if done else original
    return JsonEdited(text, unmade)
