"""``POST /v1/groundproxy/check`` from the e2e tests: one answer in, its only claim out."""

from __future__ import annotations

from typing import Any

import httpx


def only_claim(c: httpx.Client, key: str, body: dict[str, Any]) -> dict[str, Any]:
    """The report of the single claim ``body``'s answer makes (the call must succeed)."""
    resp = c.post("/v1/groundproxy/check", json=body, headers={"Authorization": f"Bearer {key}"})
    assert resp.status_code == 200, resp.text
    (claim,) = resp.json()["groundproxy"]["claims"]
    out: dict[str, Any] = claim
    return out
