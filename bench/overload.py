"""Overload: 100 concurrent clients at ~3x the guard's capacity against one real
``groundproxy serve`` process (real ONNX embedder, the sample docs indexed on disk, the fake
upstream as a real HTTP server, all on 127.0.0.1), for 5 minutes.

Three tenants on one index, the default 800 ms budget, half the requests sentence-streamed:

- ``blockq``: ``on_guard_error: block`` + ``on_overload: queue`` — goal: 0 unverified answers
  (a late or failed guard refuses; refusals are counted, never passed on);
- ``queue``: ``on_overload: queue`` — goal: <= 1 % unverified;
- ``reject``: ``on_overload: reject`` — declared 429 ``guard_overloaded`` + ``retry-after``
  (a sentence-mode stream already answering may end in an SSE ``guard_overloaded`` error
  event instead: counted as declared too).

Answers are distinct (2,000 scripted answers, 3 claims each, figures varied) so the verdict
cache does not serve them. Capacity is measured first (8 closed-loop clients on ``queue``,
``--probe-s``); the overload phase then offers 3x that rate from ``--clients`` clients (each
waits for its answer: at most ``--clients`` in flight). Reported: errors other than declared
429s (goal 0), unverified per tenant, ``/healthz`` p50/p99 polled every 100 ms by a process
of its own (bench.healthz_probe; goal p99 < 50 ms) and, as before, from the load clients'
loop, RSS from 30 s into the phase to the end (goal drift <= 10 %).

    nice -n 5 .venv/bin/python -m bench.overload [--seconds 300] [--clients 100]

Writes bench/results/overload.txt and overload.json. Not part of the default test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.harness import ingest_samples, median, pct, rss_mb
from groundproxy.policies.keys import hash_key
from groundproxy.testing import processes as p

RESULTS = Path(__file__).resolve().parent / "results"
ANSWERS = 2000
TENANTS: dict[str, dict[str, Any]] = {
    "blockq": {"on_guard_error": "block", "on_overload": "queue"},
    "queue": {"on_overload": "queue"},
    "reject": {"on_overload": "reject"},
}


def _answer(i: int) -> str:
    months = 12 if i % 3 else 24  # one in three carries a wrong figure
    return (
        f"The Acme vacuum robot has a limited warranty of {months} months from the date of "
        f"purchase. Batteries are covered for {i % 9 + 1} months. You can return an unused "
        f"robot within {i % 40 + 1} days of delivery for a full refund."
    )


def _setup(tmp: Path, up_port: int) -> tuple[Path, Path, Path]:
    script = tmp / "script.json"
    rules = [{"match": f"[q{i}]", "answer": _answer(i)} for i in range(ANSWERS)]
    script.write_text(json.dumps({"default": "I do not know.", "rules": rules}), "utf-8")
    policies, data = tmp / "policies", tmp / "data"
    policies.mkdir()
    for tenant, extra in TENANTS.items():
        spec: dict[str, Any] = {
            "tenant": tenant,
            "keys": [hash_key(f"sk-overload-{tenant}")],
            "upstream": {
                "model": "openai/gpt-4o-mini",
                "api_base": f"http://127.0.0.1:{up_port}/v1",
                "timeout_s": 60,
            },
            "retrieval": {"index": "acme", "shared_with": sorted(TENANTS)},
            **extra,
        }
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), "utf-8")
    ingest_samples(data)
    return script, policies, data


@dataclass
class Tally:
    ok: int = 0
    declared_429: int = 0
    errors: int = 0
    unverified: int = 0
    refused: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    error_samples: list[str] = field(default_factory=list)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(what[:300])


def _verdict(resp: httpx.Response, stream: bool) -> dict[str, Any]:
    if not stream:
        return dict(resp.json()["groundproxy"])
    verdict: dict[str, Any] = {}
    for line in resp.text.splitlines():
        if line.startswith("data: {"):
            event = json.loads(line[6:])
            if "error" in event:
                if event["error"].get("code") == "guard_overloaded":
                    return {"overloaded": True}  # declared: a later segment was refused
                raise ValueError(f"SSE error event: {event['error']}")
            verdict = event.get("groundproxy", verdict)
    return verdict


async def _one(c: httpx.AsyncClient, tenant: str, i: int, tally: Tally) -> None:
    stream = i % 2 == 0
    body = {
        "model": "gpt-4o-mini",
        "stream": stream,
        "messages": [{"role": "user", "content": f"[q{i % ANSWERS}] What does it cover?"}],
    }
    headers = {"authorization": f"Bearer sk-overload-{tenant}"}
    t = time.perf_counter()
    try:
        resp = await c.post("/v1/chat/completions", json=body, headers=headers)
        if resp.status_code == 429 and resp.json()["error"]["code"] == "guard_overloaded":
            assert int(resp.headers["retry-after"]) >= 1
            tally.declared_429 += 1
            return
        if resp.status_code != 200:
            tally.error(f"{resp.status_code} {resp.text}")
            return
        verdict = _verdict(resp, stream)
    except Exception as exc:  # counted, the run goes on
        tally.error(f"{type(exc).__name__}: {exc}")
        return
    if verdict.get("overloaded"):  # in-stream guard_overloaded event (sentence mode)
        tally.declared_429 += 1
        return
    tally.ok += 1
    tally.latencies_ms.append((time.perf_counter() - t) * 1000)
    if verdict.get("action") == "block" and verdict.get("unverified"):
        tally.refused += 1  # refused, not passed on
    elif verdict.get("unverified"):
        tally.unverified += 1


async def _load(
    base: str, clients: int, seconds: float, rate: float, tenants: list[str]
) -> dict[str, Tally]:
    """``clients`` workers, together offering ``rate`` req/s (each waits for its answer)."""
    tallies = {t: Tally() for t in tenants}
    end = time.perf_counter() + seconds
    interval = clients / rate
    counter = iter(range(10**9))

    async def worker(w: int) -> None:
        await asyncio.sleep(random.random() * min(interval, 5.0))  # staggered start
        while time.perf_counter() < end:
            t = time.perf_counter()
            i = next(counter)
            tenant = tenants[i % len(tenants)]
            await _one(c, tenant, random.randrange(10**6), tallies[tenant])
            await asyncio.sleep(max(0.0, interval - (time.perf_counter() - t)))

    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as c:
        await asyncio.gather(*(worker(w) for w in range(clients)))
    return tallies


async def _healthz(base: str, stop: asyncio.Event, out: list[float]) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as c:
        while not stop.is_set():
            t = time.perf_counter()
            await c.get("/healthz")
            out.append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(0.1)


async def _rss(pid: int, stop: asyncio.Event, out: list[tuple[float, float]]) -> None:
    t0 = time.perf_counter()
    while not stop.is_set():
        out.append((time.perf_counter() - t0, rss_mb(pid)))
        await asyncio.sleep(5.0)


async def _overload(
    base: str, pid: int, a: argparse.Namespace, rate: float
) -> tuple[dict[str, Tally], list[float], list[float], list[tuple[float, float]], float]:
    """The load phase, /healthz polled in this loop and by a process of its own
    (bench.healthz_probe), RSS sampled."""
    stop = asyncio.Event()
    health: list[float] = []
    rss: list[tuple[float, float]] = []
    side = [
        asyncio.create_task(_healthz(base, stop, health)),
        asyncio.create_task(_rss(pid, stop, rss)),
    ]
    probe_file = Path(tempfile.mkstemp(prefix="gp-healthz-", suffix=".txt")[1])
    probe = subprocess.Popen(
        [sys.executable, "-m", "bench.healthz_probe", base, str(probe_file)],
        cwd=p.REPO_ROOT,
    )
    t = time.perf_counter()
    tallies = await _load(base, a.clients, a.seconds, rate, sorted(TENANTS))
    wall = time.perf_counter() - t
    stop.set()
    probe.send_signal(signal.SIGTERM)
    probe.wait(timeout=60)
    await asyncio.gather(*side)
    apart = [float(x) for x in probe_file.read_text(encoding="utf-8").split()]
    probe_file.unlink()
    return tallies, health, apart, rss, wall


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--probe-s", type=float, default=30.0)
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--out", type=Path, default=RESULTS / "overload")
    return ap.parse_args()


def main() -> None:
    a = _args()
    tmp = Path(tempfile.mkdtemp(prefix="gp-overload-"))
    up_port, gp_port = p.free_port(), p.free_port()
    upstream = proxy = None
    try:
        script, policies, data = _setup(tmp, up_port)
        upstream = p.start_fake_upstream(up_port, script, log_path=tmp / "upstream.log")
        proxy = p.start_proxy(gp_port, policies, data, log_path=tmp / "proxy.log", timeout_s=900)
        base = f"http://127.0.0.1:{gp_port}"
        probe = asyncio.run(_load(base, 8, a.probe_s, 1e9, ["queue"]))["queue"]
        # answers/s the server sustained (verified or, past the budget, unverified)
        capacity = max(probe.ok, 1) / a.probe_s
        rate = a.factor * capacity
        tallies, health, apart, rss, wall = asyncio.run(_overload(base, proxy.pid, a, rate))
        ready = httpx.get(f"{base}/readyz", timeout=10).status_code
        overloads = _overload_counts(httpx.get(f"{base}/metrics", timeout=10).text)
    finally:
        for proc in (proxy, upstream):
            if proc is not None:
                p.stop_process(proc)
    write(a, tallies, health, apart, rss, wall, capacity, rate, probe, ready, overloads)


def _overload_counts(metrics: str) -> dict[str, dict[str, int]]:
    """``groundproxy_guard_overload_total`` per tenant and outcome, from /metrics text."""
    out: dict[str, dict[str, int]] = {}
    for line in metrics.splitlines():
        if line.startswith("groundproxy_guard_overload_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
            count = int(float(line.rsplit(" ", 1)[1]))
            out.setdefault(labels["tenant"], {})[labels["outcome"]] = count
    return out


def write(
    a: argparse.Namespace, tallies: dict[str, Tally], health: list[float], apart: list[float],
    rss: list[tuple[float, float]], wall: float, capacity: float, rate: float, probe: Tally,
    ready: int, overloads: dict[str, dict[str, int]],
) -> None:  # fmt: skip
    warm = [r for t, r in rss if t >= 30.0] or [r for _, r in rss]
    drift = (warm[-1] - warm[0]) / warm[0]
    errors = sum(t.errors for t in tallies.values())
    answered = {n: t.ok for n, t in tallies.items()}
    queue_pct = 100.0 * tallies["queue"].unverified / max(1, tallies["queue"].ok)
    lines = [
        f"bench/overload.py — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"{os.cpu_count()} CPU cores, SHARED with other jobs (load average at end: "
        f"{os.getloadavg()[0]:.1f}); one serve process; real ONNX embedder; sample docs index",
        f"capacity probe: {capacity:.2f} answers/s (8 closed-loop clients, "
        f"{a.probe_s:.0f} s, {probe.ok} answers, {probe.unverified} unverified, "
        f"{probe.errors} errors); offered {rate:.2f} req/s "
        f"({a.factor:.0f}x) from {a.clients} clients for {wall:.0f} s",
        "",
        "| tenant | answered | declared 429 | errors | unverified | refused (block) "
        "| p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {n} | {t.ok} | {t.declared_429} | {t.errors} | {t.unverified} | {t.refused} "
            f"| {median(t.latencies_ms):.0f} | {pct(t.latencies_ms, 99):.0f} |"
            for n, t in sorted(tallies.items())
        ),
        "",
        f"errors other than declared 429s: {errors} (goal 0: {'MET' if errors == 0 else 'NOT MET'})"
        + (
            f"; samples: {[s for t in tallies.values() for s in t.error_samples][:3]}"
            if errors
            else ""
        ),
        f"unverified answers, block tenant: {tallies['blockq'].unverified} (goal 0: "
        f"{'MET' if tallies['blockq'].unverified == 0 else 'NOT MET'})",
        f"unverified, queue tenant: {queue_pct:.1f} % (goal <= 1 %: "
        f"{'MET' if queue_pct <= 1.0 else 'NOT MET'})",
        f"/healthz from a process of its own: {len(apart)} polls, p50 {median(apart):.1f} ms, "
        f"p99 {pct(apart, 99):.1f} ms, max {max(apart, default=float('nan')):.0f} ms "
        f"(goal p99 < 50 ms: {'MET' if pct(apart, 99) < 50 else 'NOT MET'})",
        f"/healthz from the load clients' own event loop (its lag included): {len(health)} "
        f"polls, p50 {median(health):.1f} ms, p99 {pct(health, 99):.1f} ms, "
        f"max {max(health, default=float('nan')):.0f} ms",
        f"RSS {warm[0]:.0f} MB (30 s in) -> {warm[-1]:.0f} MB (end): drift {drift:+.1%} "
        f"(goal <= 10 %: {'MET' if abs(drift) <= 0.10 else 'NOT MET'}); /readyz after: {ready}",
        "server's overload counters (/metrics, probe included): "
        + "; ".join(
            f"{n}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
            for n, c in sorted(overloads.items())
        ),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".txt").write_text(text, encoding="utf-8")
    summary = {
        "capacity_rps": capacity, "offered_rps": rate, "wall_s": wall, "answered": answered,
        "tenants": {n: {k: v for k, v in vars(t).items() if k != "latencies_ms"}
                    for n, t in tallies.items()},
        "healthz_ms": {"p50": median(health), "p99": pct(health, 99)},
        "healthz_apart_ms": {"p50": median(apart), "p99": pct(apart, 99)}, "rss": rss,
        "overload_counters": overloads,
    }  # fmt: skip
    a.out.with_suffix(".json").write_text(json.dumps(summary, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
