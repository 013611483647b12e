"""One answer guarded piece by piece (``stream: sentence``): pure state, no I/O.

The caller runs each piece through the guard pipeline, which decides it with the same
:func:`guards.action.decide_answer` as a buffered answer, in segment mode
(:meth:`StreamedAnswer.segment`), and hands the report here (:meth:`StreamedAnswer.decided`;
:meth:`StreamedAnswer.verified` decides it itself): citation numbers continue across
pieces, the trust floor judges the answer so far. A piece that could not be verified comes
as a report of :mod:`guards.action` (:meth:`StreamedAnswer.unverified`).

A ``block`` cannot recall what was sent: the blocked piece and all after it are withheld,
the refusal is sent in their place, and every claim so far is marked ``blocked``.
"""

from __future__ import annotations

import dataclasses

from groundproxy.guards.action import decide_answer, every_claim_removed, stronger
from groundproxy.guards.answer.decision_inputs import Segment
from groundproxy.guards.answer.rewrite import Cited, footnote_block
from groundproxy.guards.judge.judged import Judged, JudgeSummary
from groundproxy.guards.types import AnswerAction, Claim, ClaimResult, ContextStats, GuardReport
from groundproxy.guards.verdict.decide import rendered_trust
from groundproxy.guards.verdict.stages import Verified
from groundproxy.policies.schema import Policy

_SENT_ACTIONS = ("kept", "flagged", "annotated", "corrected", "removed")


def _shifted(results: list[ClaimResult], offset: int) -> list[ClaimResult]:
    """Copies of ``results`` with claim spans moved from the piece into the answer."""
    return [
        dataclasses.replace(
            r, claim=Claim(r.claim.text, (r.claim.span[0] + offset, r.claim.span[1] + offset))
        )
        for r in results
    ]


class StreamedAnswer:
    """Pieces in, the text to send for each out, the answer's report at the end."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.cited: Cited = {}
        self.results: list[ClaimResult] = []
        self.original: list[str] = []
        self.sent: list[str] = []
        self.action: AnswerAction = "none"
        self.blocked = False
        self.unverified_seen = False
        self.guard_ms = 0.0
        self.verifier = ""
        self.context: ContextStats | None = None  # the pieces' request-context costs, summed
        self.judge: JudgeSummary | None = None  # the judge's figures over the pieces

    def _raise_action(self, action: AnswerAction) -> None:
        self.action = stronger(self.action, action)

    def _block(self) -> str:
        self.blocked = True
        self.action = "block"
        for r in self.results:
            if r.action in _SENT_ACTIONS:
                r.action = "blocked"
        return ("\n\n" if self.sent else "") + self.policy.actions.refusal

    def passthrough(self, text: str) -> str:
        """A piece that is not verified (code, punctuation only): sent as it is."""
        self.original.append(text)
        return "" if self.blocked else text

    def segment(self) -> Segment:
        """Where the next piece stands: citation numbers so far, the claims already sent."""
        return Segment(self.cited, tuple(self.results))

    def verified(
        self, verified: Verified, offset: int, guard_ms: float, judged: Judged | None = None
    ) -> tuple[str, GuardReport]:
        """The text to send for a verified piece ("" once blocked), and the piece's report
        (the one decision, :func:`guards.action.decide_answer`, in segment mode);
        ``judged``: the judge's word on its escalated claims (guards.judge.merge)."""
        piece = decide_answer(verified, self.policy, judged, segment=self.segment())
        return self.decided(verified, piece, offset, guard_ms, judged), piece

    def decided(
        self,
        verified: Verified,
        piece: GuardReport,
        offset: int,
        guard_ms: float,
        judged: Judged | None = None,
    ) -> str:
        """The text to send for a verified piece whose report (``piece``) was decided in
        segment mode at :meth:`segment` ("" once blocked)."""
        self.original.append(verified.answer)
        self.guard_ms += guard_ms
        self.verifier = verified.verifier or self.verifier
        if verified.context is not None:
            if self.context is None:
                self.context = ContextStats()
            self.context.add(verified.context)
        if judged is not None:
            self.judge = judged.summary if self.judge is None else self.judge.add(judged.summary)
        self.results.extend(_shifted(piece.claims, offset))
        if piece.blocked:
            return self._block()
        self._raise_action(piece.action)
        return piece.text

    def unverified(self, report: GuardReport, offset: int, guard_ms: float) -> str:
        """A piece whose guard failed or ran out of time (a :mod:`guards.action` failure report)."""
        self.original.append(report.original)
        self.guard_ms += guard_ms
        self.verifier = report.verifier or self.verifier
        self.unverified_seen = True
        self.results.extend(_shifted(report.claims, offset))
        if report.blocked:
            return self._block()
        self._raise_action("unverified")
        return report.original

    def tail(self) -> str:
        """Footnotes (and a refusal when every claim was removed), sent after the last piece."""
        if self.blocked:
            return ""
        if every_claim_removed(self.results):  # guards.action, row 9
            return self._block()
        if self.policy.citations == "footnotes" and self.cited:
            return "\n\n" + footnote_block(self.cited)
        return ""

    def report(self) -> GuardReport:
        trust = 0.0 if self.unverified_seen else rendered_trust(self.results)
        return GuardReport(
            original="".join(self.original),
            text="".join(self.sent),
            claims=self.results,
            trust=trust,
            action=self.action,
            blocked=self.blocked,
            unverified=self.unverified_seen,
            latency_ms=self.guard_ms,
            verifier=self.verifier,
            context=self.context,
            judge=None if self.judge is None else self.judge.as_dict(),
        )
