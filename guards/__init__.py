"""Pure verification logic over plain data: claims, evidence, verdicts, actions.

Nothing here imports a web framework or does I/O of its own; retrieval and model
inference reach it through the small protocols in :mod:`groundproxy.guards.types`.

This module is the package's public surface: the serving layer (``proxy/``) and the
integrations import the guard from here (and its data types from ``guards.types``), never
from the modules behind it (``tests/test_architecture.py`` checks that).

- the two stages: :func:`verify` (claims, evidence, rules, one verifier batch) and
  :func:`apply` (verdicts, answer action, rewrite, trust, citations), and
  :func:`decide_claims` (the verdicts alone); every choice between none / annotate / flag /
  rewrite / block / unverified is made in :mod:`guards.action` (its table);
- streaming: :class:`SentenceSegmenter`/:class:`Segment` and :class:`StreamedAnswer`;
- failures and overload: :func:`failure_report`, :func:`budget_error`, :func:`admission`, …;
- rendering: :func:`report_body`, :func:`report_headers`, :func:`header_safe`;
- JSON answers, the verdict cache, the tenant adapter (and the upstream-logprob signal it
  may read), conformal maths, the trace walk.
"""

from groundproxy.guards.action import (
    apply,
    apply_adapted,
    decide_answer,
    disabled_report,
    failure_report,
    no_claims_report,
    refused_on_guard_error,
    unmade_edits,
)
from groundproxy.guards.adapter.combiner import Adapter, ZeroShotRecord, read_adapter, read_record
from groundproxy.guards.adapter.features import (
    FEATURE_SETS,
    FEATURES,
    LOGPROB_FEATURES,
    LOGPROB_SETS,
    TOKEN_FEATURES,
    answer_features,
    features_from_signals,
    impute_missing,
)
from groundproxy.guards.adapter.signals import CLAIM_FIELDS, answer_signals
from groundproxy.guards.answer.choices import combined as combined_choices
from groundproxy.guards.answer.decision_inputs import InForce
from groundproxy.guards.answer.decision_inputs import Segment as InAnswer
from groundproxy.guards.answer.failures import admission, budget_error, overload_error, shed_error
from groundproxy.guards.answer.report import NO_CLAIMS, header_safe, report_body, report_headers
from groundproxy.guards.answer.streamed import StreamedAnswer
from groundproxy.guards.claims.json_claims import (
    claim_text,
    guarded_json,
    parse_json_answer,
    response_schema,
)
from groundproxy.guards.claims.segments import Segment, SentenceSegmenter
from groundproxy.guards.judge.merge import (
    ADAPTER_GOOD,
    Judged,
    JudgeSummary,
    adapter_sure,
    judged_label,
    merge,
    settle,
    summarize,
    zero_shot_decides,
)
from groundproxy.guards.judge.opinion import (
    BadJudgement,
    Escalated,
    JudgeVerdict,
    Outcome,
    SkipReason,
    cache_key,
    checked,
    escalation,
    judge_messages,
    parse_judgement,
    response_format,
)
from groundproxy.guards.pipeline import (
    Backends,
    RequestContext,
    evidence_fn,
    run_guard,
    with_context,
)
from groundproxy.guards.verdict.cache import CachingVerifier, VerdictCache
from groundproxy.guards.verdict.conformal import (
    beta_binomial_interval,
    conformal_threshold,
    coverage,
)
from groundproxy.guards.verdict.decide import model_threshold, resolve_threshold
from groundproxy.guards.verdict.ladder import NO_LADDER, CostMeter, Rungs, StrongRung, ladder_counts
from groundproxy.guards.verdict.logprobs import (
    TokenLogprob,
    claim_logprobs,
    parse_logprobs,
    verified_logprobs,
)
from groundproxy.guards.verdict.logprobs_kept import (
    PieceTally,
    TokenQueue,
    dropped_note,
    still_describes,
)
from groundproxy.guards.verdict.stages import Verified, verify
from groundproxy.guards.verdict.stages import decide as decide_claims
from groundproxy.guards.verdict.trace_walk import TraceClaim, TraceNode, final_step, walk_back
from groundproxy.guards.verdict.uncertainty import (
    CAL_EPS,
    CAL_METHODS,
    RISK_FEATURES,
    Calibration,
    ErrorRanker,
    features_from_claim_row,
)
from groundproxy.guards.verdict.uncertainty import GROUPS as RISK_GROUPS

__all__ = [
    "ADAPTER_GOOD",
    "CAL_EPS",
    "CAL_METHODS",
    "CLAIM_FIELDS",
    "FEATURES",
    "FEATURE_SETS",
    "LOGPROB_FEATURES",
    "LOGPROB_SETS",
    "NO_CLAIMS",
    "NO_LADDER",
    "RISK_FEATURES",
    "RISK_GROUPS",
    "TOKEN_FEATURES",
    "Adapter",
    "Backends",
    "BadJudgement",
    "CachingVerifier",
    "Calibration",
    "CostMeter",
    "ErrorRanker",
    "Escalated",
    "InAnswer",
    "InForce",
    "JudgeSummary",
    "JudgeVerdict",
    "Judged",
    "Outcome",
    "PieceTally",
    "RequestContext",
    "Rungs",
    "Segment",
    "SentenceSegmenter",
    "SkipReason",
    "StreamedAnswer",
    "StrongRung",
    "TokenLogprob",
    "TokenQueue",
    "TraceClaim",
    "TraceNode",
    "VerdictCache",
    "Verified",
    "ZeroShotRecord",
    "adapter_sure",
    "admission",
    "answer_features",
    "answer_signals",
    "apply",
    "apply_adapted",
    "beta_binomial_interval",
    "budget_error",
    "cache_key",
    "checked",
    "claim_logprobs",
    "claim_text",
    "combined_choices",
    "conformal_threshold",
    "coverage",
    "decide_answer",
    "decide_claims",
    "disabled_report",
    "dropped_note",
    "escalation",
    "evidence_fn",
    "failure_report",
    "features_from_claim_row",
    "features_from_signals",
    "final_step",
    "guarded_json",
    "header_safe",
    "impute_missing",
    "judge_messages",
    "judged_label",
    "ladder_counts",
    "merge",
    "model_threshold",
    "no_claims_report",
    "overload_error",
    "parse_json_answer",
    "parse_judgement",
    "parse_logprobs",
    "read_adapter",
    "read_record",
    "refused_on_guard_error",
    "report_body",
    "report_headers",
    "resolve_threshold",
    "response_format",
    "response_schema",
    "run_guard",
    "settle",
    "shed_error",
    "still_describes",
    "summarize",
    "unmade_edits",
    "verified_logprobs",
    "verify",
    "walk_back",
    "with_context",
    "zero_shot_decides",
]
