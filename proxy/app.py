"""The FastAPI application. Models, indexes and litellm load in the lifespan, never at import."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import structlog
from fastapi import FastAPI

from groundproxy.guards.errors import GroundproxyError
from groundproxy.policies.loader import PolicyStore
from groundproxy.proxy.errors import install_error_handlers
from groundproxy.proxy.guarding import GuardService
from groundproxy.proxy.metrics import MetricsMiddleware
from groundproxy.proxy.middleware import RequestIdMiddleware
from groundproxy.proxy.routes import admin, chat, meta, provenance
from groundproxy.proxy.routes import metrics as metrics_route
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.state import AppState
from groundproxy.proxy.storage import open_storage
from groundproxy.proxy.upstream import UpstreamClient

log = structlog.get_logger(__name__)


def _load_resources(state: AppState) -> None:
    from groundproxy.retrieval.embedder import load_embedder

    settings = state.settings
    if state.storage is not None:
        state.storage.start()  # Postgres: connect and run the schema migrations
    state.upstream = UpstreamClient()
    guard = GuardService(
        settings.data,
        load_embedder(settings.embedder),
        batch_window_ms=settings.batch_window_ms,
        batch_max=settings.batch_max,
        storage=state.storage,
    )
    tenants = state.policies.tenants()
    verifier_names = sorted(
        {p.policy.verifier.model for t in tenants if (p := state.policies.get(t)) is not None}
    )
    state.load_errors.extend(guard.warm_up(verifier_names))
    index_names = sorted(
        {p.policy.index_name for t in tenants if (p := state.policies.get(t)) is not None}
    )
    state.load_errors.extend(guard.indexes.preload(index_names))
    state.guard = guard


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: AppState = app.state.gp
    errors = state.policies.load()
    state.load_errors.extend(errors)
    for err in errors:
        log.warning("policy_not_loaded", error=err)
    if state.settings.watch_policies:
        state.policies.start_watching(state.settings.policy_poll_s)
        state.policies.install_sighup(asyncio.get_running_loop())
    try:
        await anyio.to_thread.run_sync(_load_resources, state)
    except GroundproxyError as exc:
        log.error("startup_failed", error=exc.message)
        raise
    state.ready = True
    log.info("ready", tenants=len(state.policies.tenants()), errors=len(state.load_errors))
    try:
        yield
    finally:
        state.ready = False
        if state.guard is not None:
            state.guard.close()
        state.policies.stop_watching()
        if state.settings.watch_policies:
            state.policies.uninstall_sighup()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(
        title="groundproxy",
        version="0.1.0",
        description="OpenAI-compatible guardrail proxy",
        lifespan=lifespan,
    )
    app.state.gp = AppState(settings=settings, policies=PolicyStore(settings.policies))
    app.state.gp.storage = storage = open_storage(settings.data, settings.database_url)
    app.state.gp.traces = storage.traces()
    install_error_handlers(app)
    app.include_router(meta.router)
    app.include_router(chat.router)
    app.include_router(admin.router)
    app.include_router(provenance.router)
    app.include_router(metrics_route.router)
    app.add_middleware(MetricsMiddleware)  # inside RequestIdMiddleware: sees the tenant
    app.add_middleware(RequestIdMiddleware)
    return app
