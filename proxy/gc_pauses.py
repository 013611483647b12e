"""Python's cyclic garbage collector, kept from stalling the server.

The collector stops every thread of the process, the event loop included, for as long as a
collection takes. After start-up the process holds ~475,000 tracked objects (policies, the
tokenizer's and the models' Python-side state, the indexes' metadata): under load a full
(generation 2) collection walked them all and took ~600 ms, twice a minute — every request
in flight stalled, and queued guards ran past their budgets (bench/overload.py).

:func:`freeze_startup` moves everything alive at the end of start-up into the collector's
permanent generation (``gc.freeze``, O(1)): those objects are never walked again, and full
collections only walk what was made since (~45,000 objects, ~70 ms).
:meth:`GcPauses.install` times every collection into
``groundproxy_gc_pause_seconds{generation}`` so that an operator sees the stalls.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Histogram


def freeze_startup() -> int:
    """Freeze what is alive (module docstring); returns the objects frozen."""
    gc.freeze()
    return gc.get_freeze_count()


def thaw() -> None:
    """Give the frozen objects back to the collector (at shutdown: an app made and dropped
    in one process, as tests do, leaves its objects collectable)."""
    gc.unfreeze()


class GcPauses:
    """Times each collection of the process into a histogram (one per app's registry)."""

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started:
            seconds = time.perf_counter() - self._started
            self.histogram.labels(str(info.get("generation", "?"))).observe(seconds)
            self._started = 0.0

    def install(self) -> None:
        gc.callbacks.append(self)

    def remove(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
