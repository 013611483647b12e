"""``Authorization: Bearer KEY`` (or ``api-key: KEY``) → the tenant whose policy lists the
key's sha256 hash.

Routes take the tenant as a FastAPI dependency (``loaded: Tenant``, ``AdminTenant`` or
``ReaderTenant``): the key is checked and the tenant bound into structlog's contextvars (the
logs' and the request metrics' ``tenant``) before the route's body runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import structlog
from fastapi import Depends
from starlette.requests import Request

from groundproxy.errors import AuthenticationError, PermissionDeniedError
from groundproxy.policies.loader import LoadedPolicy, PolicyStore
from groundproxy.proxy.state import app_state
from groundproxy.proxy.storage.feedback import CALLER, key_fingerprint


def bearer_key(request: Request) -> str:
    """The key from ``Authorization: Bearer KEY``, or Azure OpenAI's ``api-key: KEY``."""
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if not header and request.headers.get("api-key", "").strip():
        key = request.headers["api-key"]
    elif scheme.lower() != "bearer" or not key.strip():
        raise AuthenticationError(
            "missing API key: send 'Authorization: Bearer <key>' (OPENAI_API_KEY in the SDK)"
            " or 'api-key: <key>'"
        )
    # every route reads the key here, in the request's task: a label this request causes
    # (judge.labels) records whose it was (its fingerprint, never the key: label_count)
    CALLER.set(key_fingerprint(key.strip()))
    return key.strip()


def _unknown_key() -> AuthenticationError:
    return AuthenticationError("incorrect API key provided: no tenant has this key")


def tenant_for(request: Request, store: PolicyStore) -> LoadedPolicy:
    loaded = store.lookup_key(bearer_key(request))
    if loaded is None:
        raise _unknown_key()
    return loaded


_ADMIN_ACTS = (("/groundproxy/documents", "manage documents"), ("/groundproxy/feedback",
               "label answers"))  # fmt: skip


def _admin_act(path: str) -> str:
    """What an admin-only route does, for the 403 of a key that may not."""
    return next((act for prefix, act in _ADMIN_ACTS if prefix in path), "use this endpoint")


def admin_tenant_for(request: Request, store: PolicyStore) -> LoadedPolicy:
    key = bearer_key(request)
    loaded = store.lookup_admin_key(key)
    if loaded is None:
        if store.lookup_key(key) is not None:
            raise PermissionDeniedError(
                f"this key may not {_admin_act(request.url.path)}: that needs an admin key of "
                "the tenant (one of its policy's admin_keys), not one of its API keys"
            )
        raise _unknown_key()
    return loaded


def reader_tenant_for(request: Request, store: PolicyStore) -> LoadedPolicy:
    """The caller's tenant from a normal or an admin key (the read-only provenance API)."""
    key = bearer_key(request)
    loaded = store.lookup_key(key) or store.lookup_admin_key(key)
    if loaded is None:
        raise _unknown_key()
    return loaded


Lookup = Callable[[Request, PolicyStore], LoadedPolicy]


def _bound(lookup: Lookup, request: Request) -> LoadedPolicy:
    loaded = lookup(request, app_state(request).policies)
    structlog.contextvars.bind_contextvars(tenant=loaded.policy.tenant)
    return loaded


# async: FastAPI awaits them in the request's task, so the bound tenant reaches the route
# and the middleware (a sync dependency would run, and bind, in a worker thread).
async def tenant(request: Request) -> LoadedPolicy:
    return _bound(tenant_for, request)


async def admin_tenant(request: Request) -> LoadedPolicy:
    return _bound(admin_tenant_for, request)


async def reader_tenant(request: Request) -> LoadedPolicy:
    return _bound(reader_tenant_for, request)


Tenant = Annotated[LoadedPolicy, Depends(tenant)]
AdminTenant = Annotated[LoadedPolicy, Depends(admin_tenant)]
ReaderTenant = Annotated[LoadedPolicy, Depends(reader_tenant)]
