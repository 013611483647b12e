"""Deadlines on an upstream stream (policy ``stream_deadline_ms``, ``max_hold_ms``).

Every streamed mode keeps the overall deadline: sentence and relay mode read through
:class:`Paced`; buffer mode (chat, Responses and legacy completions streams, which answer
only once the whole answer is in) wraps its upstream call in :func:`within_deadline`, so a
never-ending upstream stream ends in a 504 ``stream_deadline`` error before any byte is sent.

:class:`Paced` yields the upstream's deltas, and ``None`` when text has been held for
``max_hold_ms`` with no new delta to end it (sentence mode then sends what it holds);
past ``stream_deadline_ms`` it raises UpstreamTimeoutError (``stream_deadline``), which
the stream writers send as an OpenAI-shaped SSE error event.

The pending read is never cancelled to keep a deadline: a timed-out wait leaves it running
(cancelling a read mid-way would kill the upstream stream), and :meth:`Paced.aclose`
cancels it at the end, before the upstream stream is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from groundproxy.errors import UpstreamTimeoutError
from groundproxy.policies.schema import Policy
from groundproxy.proxy.upstream.types import StreamDelta, UpstreamStream

T = TypeVar("T")


def _deadline_error(deadline_ms: int) -> UpstreamTimeoutError:
    return UpstreamTimeoutError(
        f"the stream passed its deadline of {deadline_ms} ms", code="stream_deadline"
    )


async def within_deadline(policy: Policy, call: Awaitable[T]) -> T:
    """``call``'s result, or ``stream_deadline`` once the policy's stream deadline passed
    (the call is cancelled: nothing was sent to the client yet)."""
    deadline = asyncio.timeout(policy.stream_deadline_ms / 1000.0)
    try:
        async with deadline:
            return await call
    except TimeoutError:
        if deadline.expired():
            raise _deadline_error(policy.stream_deadline_ms) from None
        raise


class Paced:
    """``stream``'s deltas under ``policy``'s deadlines; ``holding()``: is text held?"""

    def __init__(self, stream: UpstreamStream, policy: Policy, holding: Callable[[], bool]) -> None:
        self._it: AsyncIterator[StreamDelta] = aiter(stream)
        self._end = time.monotonic() + policy.stream_deadline_ms / 1000.0
        self._deadline_ms = policy.stream_deadline_ms
        self._hold_s = policy.max_hold_ms / 1000.0
        self._holding = holding
        self._pending: asyncio.Future[Any] | None = None
        self._hold_since: float | None = None

    def __aiter__(self) -> Paced:
        return self

    async def __anext__(self) -> StreamDelta | None:
        while True:
            now = time.monotonic()
            if now >= self._end:
                raise _deadline_error(self._deadline_ms)
            wait = self._end - now
            if not self._holding():
                self._hold_since = None
            else:  # held since the first delta that was not sent at once
                since = self._hold_since = self._hold_since or now
                if now - since >= self._hold_s:
                    self._hold_since = None
                    return None
                wait = min(wait, since + self._hold_s - now)
            if self._pending is None:
                self._pending = asyncio.ensure_future(anext(self._it))
            done, _ = await asyncio.wait({self._pending}, timeout=wait)
            if done:
                task, self._pending = self._pending, None
                try:
                    delta: StreamDelta = task.result()
                except StopAsyncIteration:
                    raise StopAsyncIteration from None
                return delta

    async def aclose(self) -> None:
        """Cancel a read still pending (the caller then closes the upstream stream)."""
        pending, self._pending = self._pending, None
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
