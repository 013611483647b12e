"""Who may use an index: it belongs to one tenant unless both policies say it is shared.

``retrieval.index`` used to be enough to read (and, with an admin key, change) any index,
another tenant's included. Now a policy whose ``retrieval.index`` is not its own tenant's
name is served only if every other party to that index lists it in
``retrieval.shared_with`` and it lists them: the tenant the index is named after (its
owner), and every other tenant using the index. A policy that breaks the rule is not served
(its keys get 401) and the reason names the index and the tenant that did not agree; the
owner is never the one refused.
"""

from __future__ import annotations

from pathlib import Path

from groundproxy.policies.parsing import LoadedPolicy


def _agree(a: LoadedPolicy, b: LoadedPolicy) -> bool:
    return b.tenant in a.policy.retrieval.shared_with and a.tenant in b.policy.retrieval.shared_with


def sharing_errors(served: list[LoadedPolicy]) -> dict[Path, str]:
    """Policy files whose ``retrieval.index`` is not shared with them, and why."""
    by_tenant = {lp.tenant: lp for lp in served}
    users: dict[str, list[LoadedPolicy]] = {}
    for lp in served:
        users.setdefault(lp.policy.index_name, []).append(lp)
    errors: dict[Path, str] = {}
    for lp in served:
        index = lp.policy.index_name
        if index == lp.tenant:
            continue
        parties = [u for u in users[index] if u.tenant != lp.tenant]
        owner = by_tenant.get(index)
        if owner is not None and owner not in parties:
            parties.append(owner)
        for other in parties:
            if not _agree(lp, other):
                errors[lp.path] = (
                    f"{lp.path}: retrieval.index '{index}' is also used by tenant "
                    f"'{other.tenant}'{' (its owner)' if other is owner else ''}; an index "
                    "belongs to one tenant unless both policies list each other in "
                    "retrieval.shared_with: tenant not served"
                )
                break
    return errors
