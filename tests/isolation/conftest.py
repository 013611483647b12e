"""Three tenants with near-identical documents, each in its own index."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from fastapi import FastAPI

from groundproxy.policies.keys import hash_key
from groundproxy.proxy.app import build_app
from groundproxy.proxy.settings import Settings
from tests.conftest import SAMPLES, _policy

# tenant → (warranty months, refund days): the only differences between their documents.
ISO_TENANTS = {"iso-a": (12, 30), "iso-b": (36, 14), "iso-c": (48, 21)}


def key(tenant: str) -> str:
    return f"sk-{tenant}-key"


def admin_key(tenant: str) -> str:
    return f"sk-{tenant}-admin"


def handbook(tenant: str) -> str:
    months, days = ISO_TENANTS[tenant]
    text = (SAMPLES / "handbook.md").read_text(encoding="utf-8")
    return text.replace("12 months", f"{months} months").replace("30 days", f"{days} days")


@pytest.fixture(scope="session")
def iso_dirs(
    tmp_path_factory: pytest.TempPathFactory, upstream_port: int, embedder: Any
) -> tuple[Path, Path]:
    from groundproxy.retrieval.ingest import ingest_texts

    policies = tmp_path_factory.mktemp("iso-policies")
    data = tmp_path_factory.mktemp("iso-data")
    products = (SAMPLES / "products.md").read_text(encoding="utf-8")
    for tenant in ISO_TENANTS:
        spec = _policy("acme", upstream_port)
        spec.update(
            tenant=tenant, keys=[hash_key(key(tenant))], admin_keys=[hash_key(admin_key(tenant))]
        )
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
        ingest_texts(
            data,
            tenant,
            [(f"{tenant}/handbook.md", handbook(tenant)), (f"{tenant}/products.md", products)],
            embedder,
        )
    return policies, data


@pytest_asyncio.fixture(scope="module")
async def iso_app(iso_dirs: tuple[Path, Path]) -> AsyncIterator[FastAPI]:
    policies, data = iso_dirs
    app = build_app(
        Settings(policies=policies, data=data, watch_policies=False, max_body_bytes=65_536)
    )
    async with app.router.lifespan_context(app):
        yield app


@pytest_asyncio.fixture(scope="module")
async def iso_client(iso_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=iso_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
        yield c
