"""What an answer becomes when it could not be verified: pure decisions, no I/O.

- guard disabled by the policy (``guard: false``): returned as is, marked unverified;
- the guard failed (a backend error, a bad calibration file …): ``on_guard_error: annotate``
  returns it marked unverified (fail open, visibly); ``block`` refuses;
- the guard ran past ``latency_budget_ms``: marked unverified, whatever ``on_guard_error``
  says — the answer was not judged wrong, only not judged in time.
"""

from __future__ import annotations

from groundproxy.guards.claims import decompose
from groundproxy.guards.errors import GroundproxyError, GuardTimeoutError
from groundproxy.guards.types import ClaimResult, GuardReport, Probs
from groundproxy.policies.schema import Policy

DISABLED = "guard disabled by policy"


def unverified_report(
    answer: str, policy: Policy, reason: str, *, latency_ms: float = 0.0, verifier: str = ""
) -> GuardReport:
    """The report for an answer that could not be verified (budget exceeded, guard error,
    guard disabled): text unchanged, T = 0.0, action "unverified", ``unverified`` True.

    The claims (when the answer can still be decomposed) carry verdict "unverifiable",
    action "unverified" and ``reason`` as explanation. Whether to block instead
    (``on_guard_error: block``) is :func:`failure_report`'s decision; ``policy`` is not
    consulted here.
    """
    del policy
    try:
        claims = decompose(answer)
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


def disabled_report(answer: str, policy: Policy) -> GuardReport:
    """An answer of a tenant whose policy turns the guard off."""
    return unverified_report(answer, policy, DISABLED)


def budget_error(policy: Policy) -> GuardTimeoutError:
    """The error that stands for a guard past the policy's latency budget."""
    return GuardTimeoutError(f"guard exceeded the latency budget of {policy.latency_budget_ms} ms")


def failure_report(answer: str, policy: Policy, exc: Exception) -> GuardReport:
    """The answer when guarding it failed with ``exc`` (module docstring): unverified, or
    refused under ``on_guard_error: block`` unless the failure is the latency budget."""
    reason = exc.message if isinstance(exc, GroundproxyError) else type(exc).__name__
    report = unverified_report(answer, policy, reason)
    if policy.on_guard_error == "block" and not isinstance(exc, GuardTimeoutError):
        report.text = policy.actions.refusal
        report.action = "block"
        report.blocked = True
    return report
