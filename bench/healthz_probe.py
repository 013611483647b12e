"""Poll ``/healthz`` from a process of its own and write each latency (ms) to a file.

``bench.overload``'s in-process poller shares an event loop with the 100 load clients, so
its figures include the *client's* loop lag; this one measures what a separate monitor sees
(it still shares the machine's cores with the load and the server).

    .venv/bin/python -m bench.healthz_probe http://127.0.0.1:8080 OUT.txt [--every 0.1]

Runs until SIGTERM/SIGINT, then writes one latency per line to OUT.txt.
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path
from types import FrameType

import httpx


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("out", type=Path)
    ap.add_argument("--every", type=float, default=0.1)
    a = ap.parse_args()
    running = True

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    out: list[float] = []
    with httpx.Client(base_url=a.base, timeout=30) as c:
        while running:
            t = time.perf_counter()
            try:
                c.get("/healthz").raise_for_status()
                out.append((time.perf_counter() - t) * 1000)
            except httpx.HTTPError:
                out.append(float("inf"))  # counted as a miss: past any goal
            time.sleep(max(0.0, a.every - (time.perf_counter() - t)))
    a.out.write_text("".join(f"{v:.3f}\n" for v in out), encoding="utf-8")


if __name__ == "__main__":
    main()
