"""The proxy's public surface for offline work: training, benchmarks, notebooks.

What serving does to an answer, callable without a server, with the names a user (or
``training/``) imports — never the modules behind them, which may move:

- :class:`Settings` and :func:`build_guard` — the guard ``groundproxy serve`` runs (embedder,
  verifiers, indexes, calibration, adapters), as a :class:`GuardService`;
- :func:`eval_policy` — the policy ``groundproxy eval`` guards labelled rows under;
- :class:`Labelled` / :func:`parse_labelled` — a labelled answer (a feedback record, or a
  row of ``../shared/data``);
- :func:`signals_of` — a labelled answer verified by the serve path: the adapter's signals
  and the zero-shot prediction (what ``groundproxy calibrate --fit`` fits on).
"""

from __future__ import annotations

from typing import Any

from groundproxy.guards import answer_signals, decide_claims, verified_logprobs
from groundproxy.policies.schema import Policy
from groundproxy.proxy.cli.evaluate import eval_policy
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.feedback import Labelled, parse_labelled

__all__ = [
    "GuardService",
    "Labelled",
    "Settings",
    "build_guard",
    "eval_policy",
    "parse_labelled",
    "signals_of",
    "zero_shot_decision",
]


def zero_shot_decision(n_claims: int, any_not_supported: bool) -> int:
    """The zero-shot decision as the served path makes it (1: hallucinated): any claim not
    supported. An answer with no claims (a question back, a greeting) asserts nothing: the
    guard serves it untouched with trust 1.0, so it is not hallucinated (0) — the one
    convention of ``groundproxy eval``, ``calibrate --fit``, ``bench.kshot`` and
    ``bench.judge`` (issue 42 item 6; the signals cache once said 1)."""
    return int(n_claims > 0 and any_not_supported)


def signals_of(item: Labelled, policy: Policy, guard: GuardService) -> tuple[dict[str, Any], int]:
    """(adapter signals, zero-shot prediction) of one labelled answer, by the serve path."""
    context = [("context", c) for c in item.context]
    verified = guard.verify_sync(item.answer, item.question, context, policy, cache=False)
    results = decide_claims(verified, policy)
    rule = zero_shot_decision(len(results), any(r.verdict != "supported" for r in results))
    sure = verified_logprobs(verified, item.logprobs)
    signals = answer_signals(verified, results, guard.alignment(verified), sure)
    # a value rule contradicts the answer (a wrong or denied value): the labels' cross-check
    signals["rule_contradicted"] = int(any(s.rule.mismatches for s in verified.claims))
    return signals, rule
