"""``FakeJudge``: an in-process :class:`~groundproxy.proxy.upstream.judge_client.JudgeCaller`
for tests — the judge's message content from a script, or a failure.

``FakeJudge(answer)`` answers every call with ``answer`` (a string, or a function of the
:class:`JudgeCall` that returns one); ``delay_s`` waits first; ``error`` raises instead.
``calls`` keeps every call it got (for "was the judge asked?" and "what did it see?").
For a judge over HTTP, run :mod:`groundproxy.testing.fake_upstream` with a script whose
rules' ``answer`` is the judge's JSON (:func:`verdicts`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from groundproxy.proxy.upstream.judge_client import JudgeCall


def verdicts(*items: tuple[str, str, str]) -> str:
    """The judge's JSON for ``(id, verdict, quote)`` items."""
    claims = [{"id": i, "verdict": v, "quote": q, "reason": "scripted"} for i, v, q in items]
    return json.dumps({"claims": claims})


class FakeJudge:
    """Scripted judge (see the module docstring)."""

    def __init__(
        self,
        answer: str | Callable[[JudgeCall], str] = '{"claims": []}',
        delay_s: float = 0.0,
        error: Exception | None = None,
    ) -> None:
        self.answer = answer
        self.delay_s = delay_s
        self.error = error
        self.calls: list[JudgeCall] = []

    async def judge(self, call: JudgeCall) -> str:
        self.calls.append(call)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        return self.answer(call) if callable(self.answer) else self.answer

    def data(self, n: int = -1) -> dict[str, Any]:
        """The DATA block (question, claims with evidence) of call ``n``."""
        user = self.calls[n].messages[-1]["content"]
        start, end = user.index("DATA:\n") + 6, user.rindex("\nEND OF DATA.")
        found: dict[str, Any] = json.loads(user[start:end])
        return found
