"""JSON answers: number, boolean and date values are claims too, checked and corrected in
place, and the answer stays valid JSON within its schema (issue 31, item 5). Before, only
string values were checked: ``{"warranty_months": 24}`` against the 12-month handbook gave
``claims: []`` and action ``none``. Real app and lifespan in process, the real index of
testing/samples, the real fake-upstream process (its ``product sheet`` answer)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import pytest_asyncio

from tests.conftest import KEYS
from tests.inprocess import app_client
from tests.spec_check import check_stream

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "product": {"type": "string"},
        "warranty_months": {"type": "integer", "minimum": 1},
        "battery_warranty_months": {"type": "integer"},
        "models": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "launched": {"type": "string"},
                    "price_eur": {"type": "number", "exclusiveMinimum": 0},
                },
            },
        },
    },
    "required": ["product", "warranty_months"],
}
FORMATS: dict[str, Any] = {
    "json_schema": {"type": "json_schema", "json_schema": {"name": "sheet", "schema": SCHEMA}},
    "json_object": {"type": "json_object"},
}


@pytest_asyncio.fixture(scope="module")
async def client(policies_dir: Path, data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(policies_dir, data_dir) as c:
        yield c


async def _ask(
    client: httpx.AsyncClient, tenant: str, response_format: Any, stream: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Give the product sheet as JSON."}],
        "response_format": response_format,
        "stream": stream,
    }
    resp = await client.post(
        "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {KEYS[tenant]}"}
    )
    assert resp.status_code == 200, resp.text
    if stream:
        chunks = check_stream(resp.text)
        content = "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
        )
        return json.loads(content), chunks[-1]["groundproxy"]
    answer = resp.json()
    return json.loads(answer["choices"][0]["message"]["content"]), answer["groundproxy"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("tenant", ["acme", "sentence"])
@pytest.mark.parametrize("kind", sorted(FORMATS))
async def test_numbers_and_dates_are_checked_and_corrected_in_place(
    client: httpx.AsyncClient, kind: str, tenant: str, stream: bool
) -> None:
    doc, gp = await _ask(client, tenant, FORMATS[kind], stream)
    jsonschema.validate(doc, SCHEMA)  # still valid, still within the schema
    verdicts = {c["text"]: c["verdict"] for c in gp["claims"]}
    assert verdicts["Acme vacuum robot warranty_months: 24 months."] == "contradicted"
    assert verdicts["Acme R3 price_eur: 699 euros."] == "contradicted"
    assert verdicts["Acme R3 launched: March 2023."] == "contradicted"
    assert verdicts["Acme vacuum robot battery_warranty_months: 6 months."] == "supported"
    assert gp["action"] == "rewrite"
    # corrected in place, each with its own JSON type
    assert doc["warranty_months"] == 12 and isinstance(doc["warranty_months"], int)
    assert doc["models"][0]["price_eur"] == 599
    assert doc["models"][0]["launched"] == "2024-03"  # written back as the ISO it was
    assert doc["battery_warranty_months"] == 6 and doc["product"] == "Acme vacuum robot"


async def test_a_correction_the_schema_forbids_is_not_written(client: httpx.AsyncClient) -> None:
    strict = json.loads(json.dumps(SCHEMA))
    strict["properties"]["warranty_months"] = {"type": "integer", "enum": [24, 36]}
    fmt = {"type": "json_schema", "json_schema": {"name": "sheet", "schema": strict}}
    doc, gp = await _ask(client, "acme", fmt, False)
    jsonschema.validate(doc, strict)
    assert doc["warranty_months"] == 24  # 12 would break the enum: verdict only
    verdicts = {c["text"]: c["verdict"] for c in gp["claims"]}
    assert verdicts["Acme vacuum robot warranty_months: 24 months."] == "contradicted"
    assert doc["models"][0]["price_eur"] == 599  # the other fields still corrected
