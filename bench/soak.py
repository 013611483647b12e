"""Soak: a burst of 200 concurrent streaming clients, then a long run at moderate load,
against one real ``groundproxy serve`` process (guard-on tenant, the latency bench's cached
~100k-chunk index) in front of the instant fake upstream, all on 127.0.0.1.

Reports per phase: requests, errors (goal 0), p50/p99 latency and time to first byte; the
server's RSS and open fds at start (after warm-up), after the burst and at the end, sampled
every 30 s in between; RSS drift from after-burst to end (goal within ±10%).

    nice -n 5 .venv/bin/python -m bench.soak [--burst-s 60] [--soak-s 600] [--clients 200]
    nice -n 5 .venv/bin/python -m bench.soak --burst-s 5 --soak-s 10   # quick check

Writes bench/results/soak.txt and soak.json. Not part of the default test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import harness as h
from bench.needs_data import require

RESULTS = Path(__file__).resolve().parent / "results"


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burst-s", type=float, default=60.0)
    ap.add_argument("--clients", type=int, default=200, help="concurrent streams in the burst")
    ap.add_argument("--soak-s", type=float, default=600.0)
    ap.add_argument("--soak-clients", type=int, default=8)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "gp-latency-cache")
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--real-budget-s", type=float, default=240.0)
    ap.add_argument("--out", type=Path, default=RESULTS / "soak")
    return ap.parse_args()


async def _phase(
    target: h.Target, clients: int, seconds: float, mixed: bool, sample: Any
) -> h.PhaseResult:
    """``clients`` workers send requests back to back for ``seconds`` (a request started
    before the end runs to completion); streams only, or alternating stream/plain."""
    out = h.PhaseResult()
    end = time.perf_counter() + seconds
    n = 0

    async def worker() -> None:
        nonlocal n
        while time.perf_counter() < end:
            n += 1
            stream = not mixed or n % 2 == 0
            await h.one_request(c, target, h.body(stream), out)

    async def sampler() -> None:
        while time.perf_counter() < end:
            await asyncio.sleep(min(30.0, max(0.0, end - time.perf_counter())))
            sample()

    t0 = time.perf_counter()
    async with h.client(clients, timeout_s=300.0) as c:
        await asyncio.gather(sampler(), *(worker() for _ in range(clients)))
    out.wall_s = time.perf_counter() - t0
    return out


def _phase_row(name: str, clients: int, r: h.PhaseResult) -> str:
    return (
        f"| {name} | {clients} | {r.wall_s:.0f} | {r.count} | {r.errors} | {r.rps():.1f} "
        f"| {h.median(r.latencies_ms):.0f} | {h.pct(r.latencies_ms, 99):.0f} "
        f"| {h.median(r.ttfb_ms):.0f} | {h.pct(r.ttfb_ms, 99):.0f} |"
    )


def main() -> None:
    a = _args()
    require()
    a.cache.mkdir(parents=True, exist_ok=True)
    index = h.build_index(a.cache, a.chunks, a.real_budget_s)
    samples: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    stack = h.start_stack(a.cache, "gp-soak-")
    try:
        gp = stack.procs[1]
        target = stack.tenant("gp-on", "guarded")

        def sample(label: str = "") -> None:
            samples.append(
                {
                    "t_s": round(time.perf_counter() - t_start),
                    "label": label,
                    "rss_mb": round(h.rss_mb(gp.pid), 1),
                    "fds": h.open_fds(gp.pid),
                }
            )

        warm = asyncio.run(_phase(target, 2, 5.0, True, lambda: None))
        if warm.errors:
            raise RuntimeError(f"warm-up failed: {warm.error_samples}")
        sample("start")
        burst = asyncio.run(_phase(target, a.clients, a.burst_s, False, sample))
        time.sleep(2.0)
        sample("after burst")
        soak = asyncio.run(_phase(target, a.soak_clients, a.soak_s, True, sample))
        time.sleep(2.0)
        sample("end")
        ready = httpx.get(f"http://127.0.0.1:{stack.gp_port}/readyz", timeout=10).status_code
        up_stats = httpx.get(f"http://127.0.0.1:{stack.up_port}/_stats", timeout=10).json()
    finally:
        stack.close()

    marks = {s["label"]: s for s in samples if s["label"]}
    drift = (marks["end"]["rss_mb"] - marks["after burst"]["rss_mb"]) / marks["after burst"][
        "rss_mb"
    ]
    drift_start = (marks["end"]["rss_mb"] - marks["start"]["rss_mb"]) / marks["start"]["rss_mb"]
    errors = burst.errors + soak.errors
    lines = [
        f"bench/soak.py — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"{os.cpu_count()} CPU cores, SHARED with other jobs (load average at end: "
        f"{os.getloadavg()[0]:.1f}); bench run under nice; all on 127.0.0.1; guard-on tenant",
        f"index: {index['chunks']} chunks ({index['real_chunks']} real, "
        f"{index['filler_chunks']} synthetic filler); 5-claim answer; burst = streams only, "
        "soak = alternating stream / non-stream",
        "",
        "| phase | clients | seconds | requests | errors | req/s | p50 ms | p99 ms "
        "| TTFB p50 ms | TTFB p99 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
        _phase_row("burst", a.clients, burst),
        _phase_row("soak", a.soak_clients, soak),
        "",
        "| at | t s | RSS MB | open fds |",
        "|---|---|---|---|",
        *(
            f"| {s['label'] or 'sample'} | {s['t_s']} | {s['rss_mb']:.1f} | {s['fds']} |"
            for s in samples
        ),
        "",
        f"errors: {errors} (goal 0: {'MET' if errors == 0 else 'NOT MET'})"
        + (f"; samples: {(burst.error_samples + soak.error_samples)[:3]}" if errors else ""),
        f"RSS drift after burst → end: {drift:+.1%} (goal within ±10%: "
        f"{'MET' if abs(drift) <= 0.10 else 'NOT MET'}); start → end: {drift_start:+.1%}",
        f"open fds start / after burst / end: {marks['start']['fds']} / "
        f"{marks['after burst']['fds']} / {marks['end']['fds']}",
        f"after the run: /readyz {ready}; fake upstream counters {up_stats}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".txt").write_text(text, encoding="utf-8")
    a.out.with_suffix(".json").write_text(
        json.dumps(
            {
                "index": index,
                "samples": samples,
                "errors": errors,
                "rss_drift": drift,
                "phases": {
                    n: {
                        "requests": r.count,
                        "errors": r.errors,
                        "wall_s": r.wall_s,
                        "p50_ms": h.median(r.latencies_ms),
                        "p99_ms": h.pct(r.latencies_ms, 99),
                        "error_samples": r.error_samples,
                    }
                    for n, r in (("burst", burst), ("soak", soak))
                },
            },
            indent=1,
        ),
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
