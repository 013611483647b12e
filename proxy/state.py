"""What the lifespan loads and the routes use, hung on ``app.state.gp``; the FastAPI
dependencies that hand it to routes (``state: State``, ``services: Ready``, ``parts: Parts``,
``rid: RequestId``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, NamedTuple

from fastapi import Depends
from starlette.requests import Request

from groundproxy.errors import ServiceUnavailableError
from groundproxy.policies.loader import PolicyStore
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.guard_build import GuardParts
from groundproxy.proxy.serving.guarding import GuardService
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import Storage
from groundproxy.proxy.storage.sqlite_traces import TraceStores
from groundproxy.proxy.upstream.types import Upstream


class Services(NamedTuple):
    """What a route needs once the server is ready."""

    upstream: Upstream
    guard: GuardService


@dataclass
class AppState:
    settings: Settings
    policies: PolicyStore
    upstream: Upstream | None = None
    guard: GuardService | None = None
    ready: bool = False
    load_errors: list[str] = field(default_factory=list)
    traces: TraceStores | None = None  # multi-step traces (proxy.serving.traces)
    metrics: Metrics = field(default_factory=Metrics)
    parts: GuardParts | None = None  # embedder, indexes, verdict cache (proxy.serving.guard_build)
    storage: Storage | None = None  # embedded files or Postgres (proxy.storage.backends)

    def require(self) -> Services:
        if not self.ready or self.upstream is None or self.guard is None:
            raise ServiceUnavailableError(
                "groundproxy is still loading models and indexes; retry shortly"
            )
        return Services(self.upstream, self.guard)

    def resources(self) -> GuardParts:
        """The embedder, indexes and verdict cache the routes use (503 while loading)."""
        self.require()
        if self.parts is None:
            raise ServiceUnavailableError("groundproxy is still loading models and indexes")
        return self.parts


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.gp
    return state


def request_id(request: Request) -> str:
    rid = request.scope.get("state", {}).get("request_id")
    return str(rid) if rid else ""


# The dependencies are async so that FastAPI runs them in the request's task (a sync one
# would take a worker thread for a dictionary lookup).
async def _state(request: Request) -> AppState:
    return app_state(request)


async def _ready(request: Request) -> Services:
    return app_state(request).require()


async def _parts(request: Request) -> GuardParts:
    return app_state(request).resources()


async def _request_id(request: Request) -> str:
    return request_id(request)


State = Annotated[AppState, Depends(_state)]
Ready = Annotated[Services, Depends(_ready)]  # 503 not_ready while still loading
Parts = Annotated[GuardParts, Depends(_parts)]  # embedder, indexes, cache (503 while loading)
RequestId = Annotated[str, Depends(_request_id)]
