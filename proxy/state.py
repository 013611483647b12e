"""What the lifespan loads and the routes use, hung on ``app.state.gp``."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request

from groundproxy.guards.errors import ServiceUnavailableError
from groundproxy.policies.loader import PolicyStore
from groundproxy.proxy.guarding import GuardService
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage import Storage
from groundproxy.proxy.traces import TraceStores
from groundproxy.proxy.upstream import UpstreamClient


@dataclass
class AppState:
    settings: Settings
    policies: PolicyStore
    upstream: UpstreamClient | None = None
    guard: GuardService | None = None
    ready: bool = False
    load_errors: list[str] = field(default_factory=list)
    traces: TraceStores | None = None  # multi-step traces (proxy.traces)
    storage: Storage | None = None  # embedded files or Postgres (proxy.storage)

    def require(self) -> tuple[UpstreamClient, GuardService]:
        if not self.ready or self.upstream is None or self.guard is None:
            raise ServiceUnavailableError(
                "groundproxy is still loading models and indexes; retry shortly"
            )
        return self.upstream, self.guard


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.gp
    return state


def request_id(request: Request) -> str:
    rid = request.scope.get("state", {}).get("request_id")
    return str(rid) if rid else ""
