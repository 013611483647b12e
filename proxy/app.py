"""The FastAPI application. Models, indexes and litellm load in the lifespan, never at import."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager

import anyio
import structlog
from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from groundproxy.errors import GroundproxyError
from groundproxy.policies.loader import PolicyStore
from groundproxy.proxy.errors import install_error_handlers
from groundproxy.proxy.forwarding import ForwardHeadersMiddleware, header_names
from groundproxy.proxy.gc_pauses import GcPauses, freeze_startup, thaw
from groundproxy.proxy.metrics import MetricsMiddleware, rss_bytes
from groundproxy.proxy.middleware import RequestIdMiddleware
from groundproxy.proxy.routes import (
    admin,
    chat,
    check,
    completions,
    embeddings,
    feedback,
    inspector,
    meta,
    provenance,
    responses,
)
from groundproxy.proxy.routes import metrics as metrics_route
from groundproxy.proxy.routes.aliases import UnprefixedRoutes
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.serving.headers import EXPOSED_HEADERS
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.state import AppState
from groundproxy.proxy.storage.backends import open_storage
from groundproxy.proxy.upstream.client import UpstreamClient
from groundproxy.retrieval.storage import TenantIndexes

log = structlog.get_logger(__name__)


def _load_resources(state: AppState) -> None:
    if state.storage is not None:
        state.storage.start()  # Postgres: connect and run the schema migrations
    state.upstream = UpstreamClient()
    guard = build_guard(state.settings, metrics=state.metrics, storage=state.storage)
    state.guard, state.parts = guard, guard.parts  # before loading more: closed if that fails
    tenants = state.policies.tenants()
    verifier_names = sorted(
        {p.policy.verifier.model for t in tenants if (p := state.policies.get(t)) is not None}
    )
    state.load_errors.extend(guard.warm_up(verifier_names))
    by_index: dict[str, list[str]] = {}
    for t in tenants:
        if (p := state.policies.get(t)) is not None:
            by_index.setdefault(p.policy.index_name, []).append(t)
    failed = guard.parts.indexes.preload(sorted(by_index))
    state.load_errors.extend(failed)
    _warn_empty_indexes(guard.parts.indexes, by_index, failed)


def _warn_empty_indexes(
    indexes: TenantIndexes, by_index: dict[str, list[str]], failed: list[str]
) -> None:
    """One warning per tenant whose index holds no chunks: its answers can't be grounded."""
    for name, tenants in sorted(by_index.items()):
        if any(err.startswith(f"index {name}:") for err in failed):
            continue
        if indexes.get(name).count == 0:
            for tenant in tenants:
                log.warning("index_empty", tenant=tenant, index=name)


def _open_policies(state: AppState, resources: ExitStack) -> None:
    errors = state.policies.load()
    state.load_errors.extend(errors)
    for err in errors:
        log.warning("policy_not_loaded", error=err)
    if state.settings.watch_policies:
        state.policies.start_watching(state.settings.policy_poll_s)
        resources.callback(state.policies.stop_watching)
        state.policies.install_sighup(asyncio.get_running_loop())
        resources.callback(state.policies.uninstall_sighup)


def _close_guard(state: AppState) -> None:
    """Stop the micro-batching workers, then close every cached tenant index."""
    if state.guard is not None:
        state.guard.close()
        state.guard.parts.indexes.close()


def _close_traces(state: AppState) -> None:
    if state.traces is not None:
        state.traces.close()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Opens every resource the app holds, and closes each (last opened, first closed) at
    shutdown, or when a later one fails to open."""
    state: AppState = app.state.gp
    with ExitStack() as resources:
        _open_policies(state, resources)
        storage = state.storage or open_storage(state.settings.data, None)
        state.traces = storage.traces()
        if state.storage is not None:
            resources.callback(state.storage.close)
        resources.callback(_close_traces, state)
        resources.callback(_close_guard, state)
        try:
            await anyio.to_thread.run_sync(_load_resources, state)
        except GroundproxyError as exc:
            log.error("startup_failed", error=exc.message)
            raise
        # what start-up made is never walked by the collector again (proxy.gc_pauses)
        frozen, pauses = freeze_startup(), GcPauses(state.metrics.gc_pause)
        pauses.install()
        resources.callback(thaw)
        resources.callback(pauses.remove)
        state.ready = True
        log.info(
            "ready",
            tenants=len(state.policies.tenants()),
            errors=len(state.load_errors),
            pid=os.getpid(),
            rss_mb=round(rss_bytes() / 2**20, 1),  # memory per worker (serve --workers N)
            gc_frozen=frozen,
        )
        try:
            yield
        finally:
            state.ready = False
            close = getattr(state.upstream, "aclose", None)
            if close is not None:
                await close()


def create_app_from_env() -> FastAPI:
    """The app of one ``serve --workers N`` worker: settings from ``GROUNDPROXY_*`` (which
    :func:`proxy.cli.serve.serve` set from the command line before starting the workers)."""
    from groundproxy.proxy.logs import configure_logging

    settings = Settings()
    configure_logging(settings.log_level)
    return create_app(settings)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(
        title="groundproxy",
        version="0.1.0",
        description="OpenAI-compatible guardrail proxy",
        lifespan=lifespan,
    )
    app.state.gp = AppState(settings=settings, policies=PolicyStore(settings.policies))
    app.state.gp.storage = open_storage(settings.data, settings.database_url)
    install_error_handlers(app)
    app.include_router(meta.router)
    app.include_router(chat.router)
    app.include_router(check.router)
    app.include_router(admin.router)
    app.include_router(provenance.router)
    app.include_router(metrics_route.router)
    app.include_router(feedback.router)  # reviewers' labels for calibrate --fit
    app.include_router(inspector.router)  # the verdict inspector page (/ui) and its JSON
    app.include_router(responses.router)  # POST /v1/responses (guarded)
    app.include_router(completions.router)  # POST /v1/completions (guarded)
    app.include_router(embeddings.router)  # POST /v1/embeddings (passed through)
    # innermost first; the request id is settled before the headers to forward are picked
    app.add_middleware(UnprefixedRoutes)  # the OpenAI routes without /v1
    allow = header_names(settings.forward_headers)
    app.add_middleware(ForwardHeadersMiddleware, allow=allow)
    # inside RequestIdMiddleware: sees the tenant
    app.add_middleware(MetricsMiddleware, metrics=app.state.gp.metrics)
    app.add_middleware(RequestIdMiddleware, worker_header=settings.workers > 1)
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:  # CORS is off unless the deployment names origins; outermost (preflights)
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=list(EXPOSED_HEADERS),
        )
    return app
