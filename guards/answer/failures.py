"""What an answer looks like when it could not be verified, and admission: no I/O.

:func:`unverified_report`: the text as written, T = 0.0, action ``unverified``, its claims
``unverifiable`` with the reason — for an answer whose guard was off, failed, ran past
``latency_budget_ms`` or was shed. Whether such an answer is refused instead
(``on_guard_error: block``) is decided in :mod:`guards.action` (rows 1-3, 11).

Admission (:func:`admission`): before a guard starts, the caller estimates its wait from
the queue; when wait + guard time would pass the budget, ``on_overload`` decides: ``queue``
(run anyway, within the budget), ``unverified`` (shed: the failure report at once) or
``reject`` (:func:`overload_error`, HTTP 429 with ``retry-after``).
"""

from __future__ import annotations

import math
from typing import Literal

from groundproxy.errors import GuardTimeoutError, OverloadedError
from groundproxy.guards.claims.decompose import decompose
from groundproxy.guards.claims.sentences import Stop, fast_sentence_spans, guard_cut
from groundproxy.guards.types import Claim, ClaimResult, GuardReport, Probs
from groundproxy.policies.schema import Policy

DISABLED = "guard disabled by policy"


def unverified_report(
    answer: str,
    policy: Policy,
    reason: str,
    *,
    latency_ms: float = 0.0,
    verifier: str = "",
    halt: Stop | None = None,
) -> GuardReport:
    """The report for an answer that could not be verified (budget exceeded, guard error,
    guard disabled): text unchanged, T = 0.0, action "unverified", ``unverified`` True.

    The claims (when the answer can still be decomposed) carry verdict "unverifiable",
    action "unverified" and ``reason`` as explanation. Whether to block instead
    (``on_guard_error: block``) is :func:`guards.action.failure_report`'s decision.

    The claims are those of the first ``policy.max_answer_chars``; once ``halt`` says time
    is up, the sentences of the linear splitter instead (cheap for any answer size).
    """
    cut = guard_cut(answer, policy.max_answer_chars)
    try:
        claims = decompose(answer[:cut], halt)
    except GuardTimeoutError:
        claims = [Claim(answer[s:e], (s, e)) for s, e in fast_sentence_spans(answer, 0, cut)]
    except Exception:  # the error path must not fail in turn
        claims = []
    unknown = Probs(0.0, 0.0, 1.0)
    results = [
        ClaimResult(
            claim=c,
            verdict="unverifiable",
            probs=unknown,
            uncertainty=unknown.uncertainty(),
            action="unverified",
            explanation=reason,
        )
        for c in claims
    ]
    return GuardReport(
        original=answer,
        text=answer,
        claims=results,
        trust=0.0,
        action="unverified",
        unverified=True,
        latency_ms=latency_ms,
        verifier=verifier,
    )


def budget_error(policy: Policy) -> GuardTimeoutError:
    """The error that stands for a guard past the policy's latency budget."""
    return GuardTimeoutError(f"guard exceeded the latency budget of {policy.latency_budget_ms} ms")


Admit = Literal["run", "shed", "reject"]


def admission(policy: Policy, wait_s: float, guard_s: float) -> Admit:
    """Whether a guard expected to wait ``wait_s`` then run ``guard_s`` seconds starts
    (``run``), is shed (its failure report at once) or rejected (429)."""
    if wait_s + guard_s <= policy.latency_budget_ms / 1000.0 or policy.on_overload == "queue":
        return "run"
    return "shed" if policy.on_overload == "unverified" else "reject"


def shed_error(policy: Policy, wait_s: float) -> GuardTimeoutError:
    """The failure that stands for a guard shed before it started."""
    return GuardTimeoutError(
        f"guard overloaded: an estimated wait of {wait_s * 1000.0:.0f} ms passes the "
        f"latency budget of {policy.latency_budget_ms} ms"
    )


def overload_error(policy: Policy, wait_s: float) -> OverloadedError:
    """The 429 for ``on_overload: reject``; retry once the queue ahead has drained."""
    return OverloadedError(
        f"the guard is overloaded (estimated wait {wait_s * 1000.0:.0f} ms, latency budget "
        f"{policy.latency_budget_ms} ms); retry later",
        retry_after_s=max(1, math.ceil(wait_s)),
    )
