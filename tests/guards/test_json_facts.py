"""guards.claims.json_facts: which number / boolean / date values are claims, how each is stated,
how a corrected line gives back a value of the same JSON type, and when the schema allows it."""

from __future__ import annotations

from typing import Any

import pytest

from groundproxy.guards.claims.json_facts import corrected_value, fact_line, fits, is_fact


@pytest.mark.parametrize(
    ("key", "value", "fact"),
    [
        ("warranty_months", 24, True),
        ("in_stock", False, True),
        ("launched", "2023-03", True),
        ("launched", "March 1, 2024", True),
        ("id", 7, False),
        ("user_id", 7, False),
        ("page", 3, False),
        ("name", "Acme R3", False),
        ("note", None, False),
    ],
)
def test_which_values_are_facts(key: str, value: Any, fact: bool) -> None:
    assert is_fact(key, value) is fact


def test_a_fact_is_stated_with_its_subject_key_and_unit() -> None:
    item = {"name": "Acme R3", "price_eur": 699, "launched": "2023-03", "sold_out": True}
    assert fact_line(item, ("models", 0, "price_eur"), 699) == "Acme R3 price_eur: 699 euros"
    assert fact_line(item, ("models", 0, "launched"), "2023-03") == "Acme R3 launched: March 2023"
    assert fact_line(item, ("models", 0, "sold_out"), True) == "Acme R3 sold_out: true"
    assert fact_line({"n": 3}, ("meta", "count"), 3) == "meta count: 3"


def test_a_corrected_line_gives_back_the_same_json_type() -> None:
    line = "warranty_months: 24 months"
    assert corrected_value(24, line, "warranty_months: 12 months") == 12
    assert isinstance(corrected_value(24, line, "warranty_months: 12 months"), int)
    assert corrected_value(2.5, "weight_kg: 2.5 kg", "weight_kg: 3.2 kg") == 3.2
    assert corrected_value(True, "sold_out: true", "sold_out: false") is False
    assert corrected_value("2023-03", "launched: March 2023", "launched: March 2024") == "2024-03"
    assert corrected_value("2023-03-01", "d: March 1, 2023", "d: May 2, 2024") == "2024-05-02"
    # a correction that names no day keeps an original with one (a day would be made up)
    assert corrected_value("2023-03-01", "d: March 1, 2023", "d: May 2024") is None
    assert corrected_value(24, line, "warranty_months: 24 months") is None  # the same
    assert corrected_value(24, line, "no number here") is None


@pytest.mark.parametrize(
    ("schema", "value", "ok"),
    [
        (None, 12, True),
        ({"type": "integer"}, 12, True),
        ({"type": "integer"}, 12.5, False),
        ({"type": "integer"}, True, False),  # a bool is never an integer to JSON
        ({"type": "number", "minimum": 1}, 0, False),
        ({"type": "number", "exclusiveMaximum": 10}, 10, False),
        ({"type": "integer", "multipleOf": 6}, 12, True),
        ({"type": "integer", "enum": [24, 36]}, 12, False),
        ({"type": "boolean"}, False, True),
        ({"type": "string", "format": "date"}, "2024-03-01", True),
        ({"type": "string", "format": "date"}, "2024-03", False),
        ({"type": "string", "pattern": "^2"}, "2024-03", False),  # unread keyword: never guess
        ({"type": ["integer", "null"]}, 12, True),
        ({}, 12, True),  # not typed: any value (issue 41, item 1)
        ({"minimum": 20}, 12, False),
        ({"minimum": 20}, 24, True),
    ],
)
def test_fits_reads_the_schema_and_never_guesses(schema: Any, value: Any, ok: bool) -> None:
    assert fits(schema, value) is ok
