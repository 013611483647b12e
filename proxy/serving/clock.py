"""Where the serving path reads time (a test may pass a fake clock in ``Deps``)."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch (timestamps)."""
        ...


class SystemClock:
    """The process's clocks (``time.perf_counter`` and ``time.time``)."""

    def monotonic(self) -> float:
        return time.perf_counter()

    def time(self) -> float:
        return time.time()
