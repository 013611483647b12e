"""The FastAPI application: :func:`build_app` is the one composition root.

Models, indexes and litellm load in the lifespan, never at import (:mod:`proxy.deps`)."""

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
from groundproxy.proxy.deps import Deps, build_deps
from groundproxy.proxy.errors import install_error_handlers
from groundproxy.proxy.forwarding import ForwardHeadersMiddleware, header_names
from groundproxy.proxy.gc_pauses import GcPauses, freeze_startup, thaw
from groundproxy.proxy.metrics import Metrics, MetricsMiddleware, rss_bytes
from groundproxy.proxy.middleware import RequestIdMiddleware
from groundproxy.proxy.routes import (
    admin,
    api_docs,
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
from groundproxy.proxy.serving.endpoints import make_serving
from groundproxy.proxy.serving.headers import EXPOSED_HEADERS
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.state import AppState

log = structlog.get_logger(__name__)


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


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Builds the dependencies (unless ``build_app`` was given them), opens them, makes the
    endpoints' serving objects; closes everything at shutdown or when a step fails."""
    state: AppState = app.state.gp
    with ExitStack() as resources:
        _open_policies(state, resources)
        deps = state.injected
        try:
            if deps is None:  # the heavy part (models) — in a worker thread
                deps = await anyio.to_thread.run_sync(build_deps, state.settings, state.metrics)
            state.load_errors.extend(await anyio.to_thread.run_sync(deps.open, state.policies))
        except GroundproxyError as exc:
            log.error("startup_failed", error=exc.message)
            if deps is not None:
                await deps.close()
            raise
        # what start-up made is never walked by the collector again (proxy.gc_pauses)
        frozen, pauses = freeze_startup(), GcPauses(state.metrics.gc_pause)
        pauses.install()
        resources.callback(thaw)
        resources.callback(pauses.remove)
        state.serving = make_serving(deps)
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
            state.serving = None
            await deps.close()


def create_app_from_env() -> FastAPI:
    """The app of one ``serve --workers N`` worker: settings from ``GROUNDPROXY_*`` (which
    :func:`proxy.cli.serve.serve` set from the command line before starting the workers)."""
    from groundproxy.proxy.logs import configure_logging

    settings = Settings()
    configure_logging(settings.log_level)
    return build_app(settings)


def build_app(settings: Settings | None = None, deps: Deps | None = None) -> FastAPI:
    """The one composition root: the FastAPI app for ``settings``, serving with ``deps``
    (default: :func:`proxy.deps.build_deps`, called by the lifespan)."""
    settings = settings or Settings()
    app = FastAPI(
        title="groundproxy",
        version="0.1.0",
        description="OpenAI-compatible guardrail proxy",
        lifespan=lifespan,
        docs_url=None,  # off unless asked for, then served offline (proxy.routes.api_docs)
        redoc_url=None,
        openapi_url="/openapi.json" if settings.api_docs else None,
    )
    metrics = deps.metrics if deps is not None else Metrics()
    app.state.gp = AppState(settings, PolicyStore(settings.policies), metrics, injected=deps)
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
    if settings.api_docs:
        app.include_router(api_docs.router)  # /docs, no CDN
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
