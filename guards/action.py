"""The action: what the policy does with an answer, given its claims' verdicts.

In: the claims' verdicts (:mod:`guards.verdict.decide`, under :func:`guards.verdict.stages.decide`),
the tenant's policy, and — when one is in force — an answer-level adapter
(:mod:`guards.adapter.combiner`); or, instead of verdicts, the fact that the guard could not run.
Out: the answer action (``none`` / ``annotate`` / ``flag`` / ``rewrite`` / ``block`` /
``unverified``, header ``x-groundproxy-action``), each claim's action and the returned
text (edited by :mod:`guards.answer.rewrite`). Everything that chooses between them is in this
module, in the order below; the first row that applies decides.

====  =========================================  ===========  ============================
row   situation                                  answer       claims → returned text
====  =========================================  ===========  ============================
1     guard off (``guard: false``)               unverified   unverified → as written
2     guard failed, ran past                     unverified   unverified → as written
      ``latency_budget_ms`` or was shed;
      ``on_guard_error: annotate``
3     the same, ``on_guard_error: block``        block        unverified → refusal
4     adapter in force accepts                   none (or     supported kept, the others
      (P(hallucinated) ≤ its threshold)          the rule     annotated → as written +
                                                 claims'      citations; no trust floor;
                                                 action)      a claim a value rule
                                                              contradicted keeps the
                                                              policy's action (issue 29)
5     adapter rejects                            rows 6–10    an all-supported answer's
                                                              weakest claim made
                                                              ``unverifiable`` first
6     every claim supported (or no claim)        none         kept → citations added
7     a non-supported claim whose verdict's      block        blocked → refusal
      policy action (``actions.contradicted``
      / ``actions.unverifiable``) is block
8     otherwise the strongest such action:       rewrite,     rewrite: corrected (a
      rewrite > flag > annotate                  flag or      contradicted claim with a
                                                 annotate     rule correction) or removed
                                                              (a value rule or a judge's
                                                              quote against it); flagged
                                                              instead when only a
                                                              passage's wording
                                                              (``by_wording``) or only the
                                                              verifier (``by_verifier``)
                                                              contradicts it, or a value
                                                              rule and the judge disagree
                                                              (``disputed``);
                                                              flag: flagged (marker);
                                                              annotate: annotated
9     row 8 removed every claim                  block        blocked → refusal
10    trust floor: T of the returned text <      block        blocked → refusal
      ``actions.block_below_trust`` AND a
      claim is contradicted (not only
      ``by_wording`` / ``by_verifier``,
      not ``disputed``)
11    the answer ran past ``max_answer_chars``:  unverified   the head as rows 4–10, the
      its tail is not verified                   (block       tail appended (block:
                                                 under row 3) withheld, refusal appended)
12    a JSON answer's edit its schema forbids    flag, unless flagged, why in its
      (:mod:`guards.claims.json_claims`)         another is   explanation and the notes
                                                 made
====  =========================================  ===========  ============================

Row 8's ``by_verifier``: the verifier's P(contradicted) is not proof enough to delete words
(on 900 HaluEval TRAIN pairs its removals hit 12 right summaries for 15 wrong ones): such a
claim stays ``contradicted`` and is flagged, and does not trip row 10. ``disputed``
(guards.judge.merge): a judge that disagrees with a value rule's mismatch never overturns
it; the claim is flagged (both said), neither removed nor corrected, and skips row 10.
Row 10 judges what the client would get and needs evidence *against* the answer (a floor
over unverifiable claims blocked 30 % of HaluEval's correct answers; bench/rewrite.py).

A streamed answer (``stream: sentence``, :mod:`guards.answer.streamed`) goes through the same rows
per piece (:class:`Segment`): row 9 removes the piece (blocking at the end only when every
claim was removed), row 10 judges the answer so far; a ``block`` withholds the rest and
sends the refusal (what was sent cannot be recalled).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from groundproxy.errors import GroundproxyError
from groundproxy.guards.adapter.combiner import Adapter
from groundproxy.guards.adapter.features import answer_features
from groundproxy.guards.answer.decision_inputs import InForce, Rendered
from groundproxy.guards.answer.decision_inputs import Segment as Segment  # re-exported
from groundproxy.guards.answer.failures import DISABLED, unverified_report
from groundproxy.guards.answer.rewrite import rewrite_text
from groundproxy.guards.claims.sentences import Stop
from groundproxy.guards.judge.judged import Judged, JudgeSummary, failed
from groundproxy.guards.types import (
    ActionName,
    AnswerAction,
    ClaimAction,
    ClaimResult,
    GuardReport,
    Verdict,
)
from groundproxy.guards.verdict.decide import rendered_trust, trust_score
from groundproxy.guards.verdict.stages import Verified, decide
from groundproxy.policies.schema import Policy

# How strong an answer action is; a streamed answer keeps the strongest of its pieces'.
STRENGTH: dict[AnswerAction, int] = {
    "none": 0, "annotate": 1, "flag": 2, "rewrite": 3, "unverified": 4, "block": 5
}  # fmt: skip


def stronger(a: AnswerAction, b: AnswerAction) -> AnswerAction:
    """The stronger of two answer actions (:data:`STRENGTH`)."""
    return b if STRENGTH[b] > STRENGTH[a] else a


def strongest(actions: Iterable[AnswerAction]) -> AnswerAction:
    """The strongest of ``actions`` (an answer's choices); ``none`` when there is none."""
    return max(actions, key=STRENGTH.__getitem__, default="none")


def no_claims_report(text: str) -> GuardReport:
    """An answer with nothing to verify (only tool calls, a JSON answer without a
    statement): returned as written, full trust, action ``none``."""
    return GuardReport(text, text, [], trust=1.0, action="none")


# --- rows 6-8: per claim, then per answer -------------------------------------------------


def verdict_action(verdict: Verdict, policy: Policy) -> ActionName | None:
    """What the policy does to a claim with this verdict (None for supported)."""
    if verdict == "contradicted":
        return policy.actions.contradicted
    if verdict == "unverifiable":
        return policy.actions.unverifiable
    return None


# a claim's action when not the policy's for its verdict (an accepting adapter: apply_adapted)
ActFn = Callable[[ClaimResult], ActionName | None]


def _used(r: ClaimResult, policy: Policy, act: ActFn | None) -> ActionName | None:
    used = act(r) if act else verdict_action(r.verdict, policy)
    if used == "rewrite" and (r.by_wording or r.by_verifier) and not r.correction:
        # only a passage's wording, or only the verifier, contradicts it: a removal needs
        # corroboration (a value rule or a judge's quote), so flag rather than remove
        return "flag"
    if used == "rewrite" and r.disputed:
        return "flag"  # a value rule and the judge disagree: neither edits the text alone
    return used


def answer_action(
    results: Sequence[ClaimResult], policy: Policy, act: ActFn | None = None
) -> AnswerAction:
    """Rows 6-8: ``block`` when any claim's action is block, else the strongest used."""
    action: AnswerAction = "none"
    for r in results:
        used = _used(r, policy, act)
        if used is not None:
            action = stronger(action, used)
    return action


def claim_action(r: ClaimResult, policy: Policy, act: ActFn | None = None) -> ClaimAction:
    """Row 8 for one claim of an answer that is not blocked."""
    used = _used(r, policy, act)
    if used is None:
        return "kept"
    if used == "rewrite":
        return "corrected" if r.verdict == "contradicted" and r.correction else "removed"
    return "flagged" if used == "flag" else "annotated"


# --- rows 7-9: the returned text ------------------------------------------------------------


def refuse(results: Sequence[ClaimResult], policy: Policy) -> Rendered:
    """A blocked answer: the refusal, every claim ``blocked``."""
    for r in results:
        r.action = "blocked"
    return Rendered(policy.actions.refusal, None, "block", True)


def every_claim_removed(results: Sequence[ClaimResult]) -> bool:
    """Row 9: nothing the answer asserted is left (an empty answer helps nobody)."""
    return bool(results) and all(r.action == "removed" for r in results)


def render(
    answer: str,
    results: Sequence[ClaimResult],
    policy: Policy,
    action: AnswerAction,
    *,
    segment: Segment | None = None,
    act: ActFn | None = None,
) -> Rendered:
    """The text for ``action``; sets each ``ClaimResult.action``. ``segment``: one piece of
    a streamed answer (citation numbers continue in ``segment.cited``, no "Sources:" block,
    a piece whose claims are all removed is removed, not blocked); ``act``: each claim's
    action when not the policy's for its verdict."""
    if action == "block":
        return refuse(results, policy)
    for r in results:
        r.action = claim_action(r, policy, act)
    if every_claim_removed(results) and segment is None:
        return refuse(results, policy)
    cited = None if segment is None else segment.cited
    text = rewrite_text(answer, results, policy, cited=cited, segment=segment is not None)
    return Rendered(text, rendered_trust(results), action, False)


# --- row 10: the trust floor ---------------------------------------------------------------


def below_floor(results: Sequence[ClaimResult], policy: Policy, returned_trust: float) -> bool:
    """Does the trust floor block this answer? (T of the returned text, and a
    contradicted claim among the results; see the module docstring.)"""
    # a claim only a passage's wording denies (by_wording), only the verifier contradicts
    # (by_verifier) or on which a value rule and the judge disagree (disputed) is flagged:
    # not evidence enough to withhold the whole answer
    contradicted = any(
        r.verdict == "contradicted" and not (r.by_wording or r.by_verifier or r.disputed)
        for r in results
    )
    return contradicted and returned_trust < policy.actions.block_below_trust


# --- rows 6-11 together: stage 2 ---------------------------------------------------------


def apply(
    verified: Verified,
    policy: Policy,
    segment: Segment | None = None,
    *,
    results: list[ClaimResult] | None = None,
    act: ActFn | None = None,
) -> GuardReport:
    """Stage 2: verdicts, answer action, the returned text, trust and the trust floor.

    With ``segment`` the answer is one piece of a streamed answer: the text carries no
    "Sources:" block, a piece whose claims are all removed is removed (not blocked), and
    the trust floor judges ``segment.prior`` plus this piece. ``blocked`` then means the
    stream must stop here; the claims keep the actions the piece's rendering gave them.
    ``results``: verdicts already decided (:func:`apply_adapted`); ``act``: each claim's
    action when not the policy's for its verdict (:func:`apply_adapted`).
    """
    started = time.perf_counter()
    results = decide(verified, policy) if results is None else results
    action = answer_action(results, policy, act)
    answer = verified.answer
    if segment is None:
        rendered = render(answer, results, policy, action, act=act)
        if not rendered.blocked and below_floor(results, policy, rendered.trust or 0.0):
            rendered = refuse(results, policy)
    elif action == "block":
        rendered = refuse(results, policy)
    else:
        rendered = render(answer, results, policy, action, segment=segment, act=act)
        so_far = [*segment.prior, *results]
        if below_floor(so_far, policy, rendered_trust(so_far)):
            rendered.blocked = True
            rendered.action = "block"
    apply_ms = (time.perf_counter() - started) * 1000.0
    report = GuardReport(
        original=answer,
        text=rendered.text,
        claims=results,
        trust=trust_score(results) if rendered.trust is None else rendered.trust,
        action=rendered.action,
        blocked=rendered.blocked,
        latency_ms=verified.latency_ms + apply_ms,
        verifier=verified.verifier,
        context=verified.context,
    )
    return with_unverified_tail(report, verified.tail, policy) if verified.tail else report


# --- rows 4-5: an answer-level adapter ---------------------------------------------------


def _accepting(policy: Policy) -> Policy:
    """``policy`` with every claim action ``annotate`` and no trust floor."""
    actions = policy.actions.model_copy(
        update={"contradicted": "annotate", "unverifiable": "annotate", "block_below_trust": 0.0}
    )
    return policy.model_copy(update={"actions": actions})


def _ruled(verified: Verified, results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The claims a value rule contradicted (a wrong or denied value, a correction)."""
    return [
        r
        for s, r in zip(verified.claims, results, strict=True)
        if r.verdict == "contradicted" and (s.rule.mismatches or r.correction)
    ]


def apply_adapted(
    verified: Verified,
    policy: Policy,
    adapter: Adapter,
    alignment: Sequence[tuple[float, float, float]] | None = None,
    logprobs: Sequence[tuple[float, float]] | None = None,
) -> GuardReport:
    """Stage 2 with the adapter's answer-level decision (rows 4-5); ``alignment``: each
    claim's token alignment when :attr:`Adapter.uses_tokens`; ``logprobs``: each claim's
    upstream logprobs (:func:`guards.verdict.logprobs.claim_logprobs`) when the answer came with
    them."""
    results = decide(verified, policy)
    p = adapter.p_hallucinated(answer_features(verified, results, alignment, logprobs))
    reject = p > adapter.threshold
    if reject:
        if results and all(r.verdict == "supported" for r in results):
            weakest = min(results, key=lambda r: r.probs.supported)
            weakest.verdict = "unverifiable"
            weakest.explanation = (
                f"{adapter.label} judges the answer unsupported "
                f"(p={p:.2f} > {adapter.threshold:.2f}); this is its weakest claim"
            )
        report = apply(verified, policy, results=results)
    else:
        # accepted: the verifier's doubts are annotated only, but a value rule's verdict
        # stands — an adapter never switches a correction off (issue 29)
        ruled = {id(r) for r in _ruled(verified, results)}

        def act(r: ClaimResult) -> ActionName | None:
            if id(r) in ruled:
                return verdict_action(r.verdict, policy)
            return None if r.verdict == "supported" else "annotate"

        report = apply(verified, _accepting(policy), results=results, act=act)
        if not ruled:
            report.action = "none"
    report.adapter = {
        "version": adapter.version,
        "source": adapter.source,
        "p_hallucinated": round(p, 4),
        "threshold": round(adapter.threshold, 4),
        "decision": "reject" if reject else "accept",
    }
    return report


# --- the decision: every verified answer or piece ends here ----------------------------------


def decide_answer(
    verified: Verified,
    policy: Policy,
    judged: Judged | None = None,
    in_force: InForce | None = None,
    segment: Segment | None = None,
) -> GuardReport:
    """The one decision of a verified answer (or streamed piece: ``segment``): the judge's
    verdicts when it judged a claim (:func:`settle`), else the adapter in force (rows 4-5;
    never per piece), else the verdicts (rows 6-11); with the judge's figures."""
    if judged is not None and judged.summary.escalated:
        return settle(verified, policy, judged.results, judged.summary, segment)
    if in_force is not None and segment is None:
        report = apply_adapted(
            verified, policy, in_force.adapter, in_force.alignment, in_force.logprobs
        )
    else:
        report = apply(verified, policy, segment)
    if judged is not None:
        report.judge = judged.summary.as_dict()
    return report


def settle(
    verified: Verified,
    policy: Policy,
    results: list[ClaimResult],
    summary: JudgeSummary,
    segment: Segment | None = None,
) -> GuardReport:
    """Stage 2 on the judged verdicts (final for the claims judged), with the judge's
    figures; ``on_guard_error: block`` refuses when the judge could not be heard."""
    report = apply(verified, policy, segment, results=results)
    report.judge = summary.as_dict()
    report.latency_ms += summary.ms  # the judge's time is guard time (x-groundproxy-latency-ms)
    refused = failed(summary) and not report.blocked
    if refused and refused_on_guard_error(report, policy, policy.actions.refusal):
        for r in report.claims:
            r.action = "blocked"
    return report


# --- rows 1-3 and 11: answers the guard did not verify ----------------------------------------


def disabled_report(answer: str, policy: Policy, halt: Stop | None = None) -> GuardReport:
    """Row 1: an answer of a tenant whose policy turns the guard off."""
    return unverified_report(answer, policy, DISABLED, halt=halt)


def failure_report(
    answer: str, policy: Policy, exc: Exception, halt: Stop | None = None
) -> GuardReport:
    """Rows 2-3: the answer when guarding it failed with ``exc`` (a backend error, the
    latency budget, shed under overload): unverified, or refused under
    ``on_guard_error: block``."""
    reason = exc.message if isinstance(exc, GroundproxyError) else type(exc).__name__
    report = unverified_report(answer, policy, reason, halt=halt)
    refused_on_guard_error(report, policy, policy.actions.refusal)
    return report


def refused_on_guard_error(report: GuardReport, policy: Policy, text: str) -> bool:
    """Rows 3, 11 and the judge's failure, decided here once: is an answer the guard could
    not vouch for refused (``on_guard_error: block``: ``text`` returned, action ``block``)?"""
    if policy.on_guard_error != "block":
        return False
    report.text = text
    report.action = "block"
    report.blocked = True
    return True


def with_unverified_tail(report: GuardReport, tail: str, policy: Policy) -> GuardReport:
    """Row 11: ``report`` of an answer's verified head, with the rest past
    ``max_answer_chars``: appended and the answer marked unverified, or — under
    ``on_guard_error: block`` — withheld, the refusal in its place (a block tenant never
    gets unverified content)."""
    report.original += tail
    if report.blocked:
        return report
    report.unverified = True
    if not refused_on_guard_error(report, policy, report.text + "\n\n" + policy.actions.refusal):
        report.text += tail
        report.action = "unverified"
    return report


# --- row 12: a JSON answer's edits that its schema did not allow -------------------------


def unmade_edits(report: GuardReport, unmade: Sequence[tuple[ClaimResult, str]]) -> GuardReport:
    """Row 12: an edit not made is flagged (and why); a rewrite with none made is a flag."""
    if not unmade or report.blocked:
        return report
    for r, why in unmade:
        r.action = "flagged"
        r.explanation = f"{r.explanation} ({why})" if r.explanation else why
        report.notes.append(why)
    if report.action == "rewrite" and all(
        r.action not in ("corrected", "removed") for r in report.claims
    ):
        report.action = "flag"
    report.trust = rendered_trust(report.claims)
    return report
