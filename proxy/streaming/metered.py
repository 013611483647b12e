"""An upstream stream that records its upstream time and token usage once it ends.

Incremental streams (sentence mode, relay) hand the upstream's deltas on as they come, so
no single call returns "the upstream took N s". :class:`MeteredStream` wraps the open
stream: when the upstream's last chunk has been read, ``groundproxy_upstream_seconds``
gets the time from opening the stream to that chunk (as a collected stream's does), and
``groundproxy_tokens_total`` the usage the upstream reported. A stream that fails or is
abandoned records nothing (like a failed buffered call).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.upstream.types import StreamDelta, UpstreamStream


class MeteredStream:
    """:class:`~proxy.upstream.types.UpstreamStream` around another, with metrics."""

    def __init__(self, inner: UpstreamStream, metrics: Metrics, tenant: str) -> None:
        self.inner = inner
        self.metrics = metrics
        self.tenant = tenant
        self.started = inner.started
        self.chunks = 0

    async def __aiter__(self) -> AsyncIterator[StreamDelta]:
        usage: dict[str, Any] | None = None
        async for delta in self.inner:
            self.chunks = self.inner.chunks
            usage = delta.usage or usage
            yield delta
        self.metrics.observe_upstream(self.tenant, time.perf_counter() - self.started, usage)

    async def aclose(self) -> None:
        await self.inner.aclose()
