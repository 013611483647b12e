"""``Authorization: Bearer KEY`` → the tenant whose policy lists the key's sha256 hash."""

from __future__ import annotations

from starlette.requests import Request

from groundproxy.errors import AuthenticationError, PermissionDeniedError
from groundproxy.policies.loader import LoadedPolicy, PolicyStore


def bearer_key(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise AuthenticationError(
            "missing API key: send 'Authorization: Bearer <key>' (OPENAI_API_KEY in the SDK)"
        )
    return key.strip()


def tenant_for(request: Request, store: PolicyStore) -> LoadedPolicy:
    loaded = store.lookup_key(bearer_key(request))
    if loaded is None:
        raise AuthenticationError("incorrect API key provided: no tenant has this key")
    return loaded


def admin_tenant_for(request: Request, store: PolicyStore) -> LoadedPolicy:
    key = bearer_key(request)
    loaded = store.lookup_admin_key(key)
    if loaded is None:
        if store.lookup_key(key) is not None:
            raise PermissionDeniedError("this key may not manage documents: use an admin key")
        raise AuthenticationError("incorrect API key provided: no tenant has this key")
    return loaded
