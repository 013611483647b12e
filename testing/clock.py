"""``FakeClock``: a :class:`~groundproxy.proxy.serving.clock.Clock` a test moves by hand.

Every :meth:`monotonic` read returns the time and then moves it on by ``step`` seconds,
so a duration the serving path measures between two reads is exactly ``step``::

    deps = build_deps(settings).replace(clock=FakeClock(step=0.25))
    # a whole answer's guard then reports x-groundproxy-latency-ms: 250
"""

from __future__ import annotations


class FakeClock:
    def __init__(self, start: float = 1000.0, step: float = 0.0, epoch: float = 1.7e9) -> None:
        self.now = start
        self.step = step
        self.epoch = epoch
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        now = self.now
        self.now += self.step
        return now

    def time(self) -> float:
        return self.epoch + self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
