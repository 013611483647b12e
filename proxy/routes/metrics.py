"""``GET /metrics``: Prometheus text format.

Readable by everyone only when ``GROUNDPROXY_METRICS_PUBLIC=true``. Otherwise: a client on
the loopback interface (the usual sidecar scraper), or any tenant's admin key; a tenant's
ordinary key gets 403, no key from elsewhere 401.
"""

from __future__ import annotations

import ipaddress

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from groundproxy.errors import AuthenticationError, PermissionDeniedError
from groundproxy.proxy.auth import bearer_key
from groundproxy.proxy.state import app_state

router = APIRouter()


def _is_loopback(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _authorize(request: Request) -> None:
    state = app_state(request)
    if state.settings.metrics_public or _is_loopback(request):
        return
    if not request.headers.get("authorization"):
        raise AuthenticationError("metrics need an admin key from outside the loopback interface")
    key = bearer_key(request)
    if state.policies.lookup_admin_key(key) is not None:
        return
    if state.policies.lookup_key(key) is not None:
        raise PermissionDeniedError("tenant keys may not read metrics: use an admin key")
    raise AuthenticationError("incorrect API key provided: no tenant has this key")


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    _authorize(request)
    state = app_state(request)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
