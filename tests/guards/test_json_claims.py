"""guards.claims.json_claims: statement values of a JSON answer become claims, and edits keep the
JSON valid and within the schema."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from groundproxy.guards.claims.json_claims import (
    claim_text,
    guarded_json,
    parse_json_answer,
    plain_string_field,
    response_schema,
    statements,
)

DOC: dict[str, Any] = {
    "name": "Acme vacuum robot",
    "facts": ["The warranty lasts 24 months.", "Batteries are covered for 6 months"],
    "meta": {"id": "x-1", "count": 3, "note": "Made in Paris by Acme Robotics."},
}
TEXT = json.dumps(DOC)


def _claim(found: Any, value: int, sub: str, action: str, correction: str | None = None) -> Any:
    start = found.starts[value] + found.leaves[value][1].index(sub)
    return SimpleNamespace(
        claim=SimpleNamespace(text=sub, span=(start, start + len(sub))),
        action=action,
        correction=correction,
    )


def test_parse_only_objects_and_arrays() -> None:
    assert parse_json_answer(f"  {TEXT}\n") == DOC
    assert parse_json_answer("[1, 2]") == [1, 2]
    assert parse_json_answer("The warranty is {12} months.") is None
    assert parse_json_answer("{not json") is None
    assert parse_json_answer('"a string"') is None


def test_statements_are_sentences_with_paths_and_each_is_its_own_line() -> None:
    assert statements(DOC) == [
        (("facts", 0), "The warranty lasts 24 months."),
        (("facts", 1), "Batteries are covered for 6 months"),
        (("meta", "note"), "Made in Paris by Acme Robotics."),
    ]
    found = claim_text(DOC)
    assert found.text.splitlines() == [
        "The warranty lasts 24 months.",
        "Batteries are covered for 6 months.",  # a full stop: claims never span two values
        "meta count: 3.",  # a number is a claim too: its key (after its parents) and value
        "Made in Paris by Acme Robotics.",
    ]
    assert found.facts == {2: 3}
    for i, (_, value) in enumerate(found.leaves):
        assert found.text[found.starts[i] : found.starts[i] + len(value)] == value
        assert found.value_of(found.starts[i]) == i
    assert found.value_of(found.starts[1] + len(found.leaves[1][1])) is None  # the added "."


def test_a_correction_is_made_in_place_and_the_json_stays_valid() -> None:
    found = claim_text(DOC)
    fix = _claim(found, 0, "24 months", "corrected", "12 months")
    out = json.loads(guarded_json(TEXT, found, [fix], False, "refused", None).text)
    assert out["facts"][0] == "The warranty lasts 12 months."
    assert out["meta"] == DOC["meta"] and out["name"] == DOC["name"]
    removed = _claim(found, 3, "Made in Paris by Acme Robotics.", "removed")
    out = json.loads(guarded_json(TEXT, found, [removed], False, "refused", None).text)
    assert out["meta"]["note"] == ""


def test_flags_never_touch_the_json_and_blocks_replace_values() -> None:
    found = claim_text(DOC)
    flagged = _claim(found, 1, "covered for 6 months", "flagged")
    assert guarded_json(TEXT, found, [flagged], False, "refused", None).text == TEXT  # same bytes
    out = json.loads(guarded_json(TEXT, found, [flagged], True, "refused", None).text)
    assert out["facts"][1] == "refused" and out["facts"][0] == DOC["facts"][0]


def test_edits_only_where_the_schema_is_a_plain_string() -> None:
    schema = {
        "type": "object",
        "properties": {
            "facts": {"type": "array", "items": {"type": "string", "maxLength": 40}},
            "meta": {"type": "object", "properties": {"note": {"type": "string"}}},
        },
    }
    assert plain_string_field(None, ("anything",))
    assert plain_string_field(schema, ("meta", "note"))
    assert not plain_string_field(schema, ("facts", 0))  # constrained: an edit might break it
    assert plain_string_field(schema, ("name",))  # not described: JSON Schema allows any value
    closed = {**schema, "additionalProperties": False}
    assert not plain_string_field(closed, ("name",))  # a key the schema forbids
    assert not plain_string_field({"anyOf": [schema]}, ("meta", "note"))  # unread: never guess
    found = claim_text(DOC)
    fix = _claim(found, 0, "24 months", "corrected", "12 months")
    edited = guarded_json(TEXT, found, [fix], False, "refused", schema)
    assert edited.text == TEXT
    assert edited.unmade == [
        (fix, "not edited: the response schema constrains the string at /facts/0")
    ]
    note = _claim(found, 3, "Paris", "corrected", "Lyon")
    out = json.loads(guarded_json(TEXT, found, [fix, note], False, "refused", schema).text)
    assert out["meta"]["note"] == "Made in Lyon by Acme Robotics." and out["facts"] == DOC["facts"]


def test_response_schema() -> None:
    assert response_schema({"type": "json_object"}) == (True, None)
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    assert response_schema(fmt) == (True, {"type": "object"})
    assert response_schema({"type": "text"}) == (False, None)
    assert response_schema(None) == (False, None)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object"},
        {},
        {"type": "object", "properties": {"name": {"type": "string"}}},
        {"type": "object", "additionalProperties": True},
        {"type": "object", "properties": {"meta": {"type": "object"}}},
    ],
    ids=["object", "empty", "other-properties", "additional-true", "untyped-parent"],
)
def test_a_field_the_schema_does_not_type_is_corrected(schema: dict[str, Any]) -> None:
    """Issue 41, item 1: JSON Schema lets a field it does not type hold any value."""
    found = claim_text(DOC)
    count = _claim(found, 2, "meta count: 3", "corrected", "meta count: 4")
    edited = guarded_json(TEXT, found, [count], False, "refused", schema)
    assert json.loads(edited.text)["meta"]["count"] == 4 and edited.unmade == []


def test_a_correction_not_made_is_listed_with_its_reason() -> None:
    found = claim_text(DOC)
    schema = {"type": "object", "properties": {"meta": {"properties": {"count": {"minimum": 5}}}}}
    count = _claim(found, 2, "meta count: 3", "corrected", "meta count: 4")
    edited = guarded_json(TEXT, found, [count], False, "refused", schema)
    assert edited.text == TEXT
    assert edited.unmade == [
        (count, "not corrected: 4 would break the response schema at /meta/count; flagged instead")
    ]
    gone = _claim(found, 2, "meta count: 3", "removed")
    edited = guarded_json(TEXT, found, [gone], False, "refused", None)
    assert edited.text == TEXT
    assert edited.unmade == [
        (gone, "not removed: /meta/count is a JSON value, kept as it was and flagged")
    ]
