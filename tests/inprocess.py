"""The real app, with its lifespan, served in process to an httpx client (tests/proxy)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from groundproxy.proxy.app import build_app
from groundproxy.proxy.settings import Settings


@asynccontextmanager
async def app_client(policies: Path, data: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app over ``policies`` and ``data`` (policy watching off)."""
    app = build_app(Settings(policies=policies, data=data, watch_policies=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            yield c
