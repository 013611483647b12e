"""What the app holds (``app.state.gp``) and the FastAPI dependencies that hand it to routes.

:class:`AppState` is made by ``build_app`` from the settings: the policies and metrics
(read before start-up ends: ``/readyz``, the metrics middleware), the dependencies a test
injected, and — once the lifespan has opened them — the :class:`Serving` objects the
endpoints call. Routes ask for what they use:

- ``state: State`` — the :class:`AppState` (settings, policies, metrics);
- ``serving: Served`` — the :class:`Serving` objects and their :class:`Deps` (503
  ``not_ready`` until start-up has finished);
- ``parts: Parts`` — the guard's embedder, indexes and caches (503 likewise);
- ``rid: RequestId`` — the request id (``x-request-id``, echoed or made).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends
from starlette.requests import Request

from groundproxy.errors import ServiceUnavailableError
from groundproxy.policies.loader import PolicyStore
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.guard_build import GuardParts
from groundproxy.proxy.settings import Settings

if TYPE_CHECKING:
    from groundproxy.proxy.deps import Deps
    from groundproxy.proxy.serving.endpoints import Serving


@dataclass
class AppState:
    settings: Settings
    policies: PolicyStore
    metrics: Metrics = field(default_factory=Metrics)
    injected: Deps | None = None  # build_app(settings, deps): used instead of build_deps
    serving: Serving | None = None  # set once the lifespan has opened the dependencies
    load_errors: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.serving is not None

    def served(self) -> Serving:
        """The serving objects; 503 ``not_ready`` while models and indexes load."""
        if self.serving is None:
            raise ServiceUnavailableError(
                "groundproxy is still loading models and indexes; retry shortly"
            )
        return self.serving


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


async def _served(request: Request) -> Serving:
    return app_state(request).served()


async def _parts(request: Request) -> GuardParts:
    return app_state(request).served().deps.guard.parts


async def _request_id(request: Request) -> str:
    return request_id(request)


State = Annotated[AppState, Depends(_state)]
Served = Annotated["Serving", Depends(_served)]  # 503 not_ready while still loading
Parts = Annotated[GuardParts, Depends(_parts)]  # embedder, indexes, cache (503 while loading)
RequestId = Annotated[str, Depends(_request_id)]
