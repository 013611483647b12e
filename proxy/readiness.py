"""``GET /readyz``: ready / not ready for anyone; details for a tenant's admin key only.

Without a key (or with a client key, or a wrong one) the body is ``{"ready": bool}``: no
tenant names, no file paths, no error text. A tenant's admin key also gets its tenant, the
policy id it is served with, and the *current* problems that concern that tenant: errors of
its own policy file as of the last policy scan (a fixed file clears them) and start-up load
errors naming its index or verifier. Other tenants' names and files never appear.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from groundproxy.policies.loader import LoadedPolicy, PolicyStore
from groundproxy.proxy.upstream.redact import scrub_paths


def _admin_policy(request: Request, store: PolicyStore) -> LoadedPolicy | None:
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return store.lookup_admin_key(key.strip())


def readiness_body(
    request: Request, store: PolicyStore, ready: bool, load_errors: list[str]
) -> dict[str, Any]:
    """The ``/readyz`` body for this caller."""
    body: dict[str, Any] = {"ready": ready}
    loaded = _admin_policy(request, store)
    if loaded is None:
        return body
    policy = loaded.policy
    own_file = str(loaded.path)
    names = (f"'{policy.index_name}'", f"'{policy.verifier.model}'", f"'{policy.tenant}'")
    current = [e for e in store.errors() if own_file in e or f"'{policy.tenant}'" in e]
    current += [e for e in load_errors if any(n in e for n in names)]
    body.update(
        tenant=policy.tenant, policy=loaded.policy_id, errors=[scrub_paths(e) for e in current]
    )
    return body
