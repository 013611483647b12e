"""A streamed upstream answer must hold an answer before it may finish.

litellm reads a streamed body line by line and skips what is not an SSE ``data:`` event;
when the upstream answers a 200 whose body is not SSE at all (an HTML error page, broken
JSON) it still ends the stream with a synthesized ``finish_reason: stop`` chunk. Passed on,
that is a clean empty answer (trust 1.0, action ``none``). :class:`AnswerSeen` raises an
``upstream_incomplete`` error instead, before the empty finish is yielded.
"""

from __future__ import annotations

from typing import Protocol

from groundproxy.errors import UpstreamError


class _Delta(Protocol):
    role: str | None
    content: str
    finish_reason: str | None


class AnswerSeen:
    """Tracks whether a stream carried a role or any content before its finish."""

    def __init__(self) -> None:
        self.any = False

    def check(self, delta: _Delta, chunks: int) -> None:
        """Call for each delta before yielding it; raises on a finish with no answer."""
        self.any = self.any or bool(delta.role or delta.content)
        if delta.finish_reason and not self.any:
            raise UpstreamError(
                f"upstream stream held no answer: it finished after {chunks} chunks without "
                "a role or any content (was the body an SSE stream?)",
                code="upstream_incomplete",
            )
