"""Fairness between tenants through one real ``groundproxy serve`` process (issue 40 item 17).

A scripted upstream (``groundproxy.testing.fake_upstream``, a process of its own) answers
every request at once with its scripted answer; two guarded tenants share the server:

- ``small``: distinct ~100-word RAG contexts with 3-claim answers, one request at a time,
  at most one per ``--every`` s alone (0.25), and during the flood at most one per
  ``--pace`` (3) x its alone p50 — a small tenant guards about a third of the time; one
  asking for most of the cores (back to back, or on a box loaded by others) gets its fair
  half during a flood, not more (proxy.serving.cpu_share);
- ``big``: distinct ~8,000-word RAG contexts with 5-claim answers (20 s budget, so all of
  its guard work is done), sent by ``--flood`` concurrent clients in a loop.

One run, side by side: the small tenant's latencies alone, then while the big tenant floods
(after ``--settle`` s of flood); ``/healthz`` is polled every 20 ms by a process of its own
(bench.healthz_probe) through both phases. Every request's input is distinct (seeded,
bench.rag_requests: neither the verdict cache nor the sentence-vector cache sees a claim or
a passage twice). Goal (issue 40.17): small p50 during ≤ 1.2 × alone, /healthz p99 < 50 ms.

    nice -n 5 .venv/bin/python -m bench.fairness [--n 30] [--flood 4] [--out FILE]
    nice -n 5 .venv/bin/python -m bench.fairness --every 0 --pace 0   # back to back

``--shared`` names the data folder when ``../shared/data`` is not beside the clone (a git
worktree). ``--env K=V`` passes a setting to the server (repeatable).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import httpx
import yaml

from bench import harness as h
from bench import rag_requests as rq
from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import (
    REPO_ROOT,
    free_port,
    start_fake_upstream,
    start_proxy,
    stop_process,
)

TENANTS: dict[str, dict[str, Any]] = {"small": {}, "big": {"latency_budget_ms": 20_000}}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def _setup(work: Path, reqs: list[rq.RagRequest], up: int) -> None:
    script = rq.upstream_script(reqs)
    (work / "script.json").write_text(json.dumps(script), encoding="utf-8")
    (work / "policies").mkdir()
    for tenant, extra in TENANTS.items():
        spec = {
            "tenant": tenant,
            "keys": [hash_key(f"sk-{tenant}")],
            "upstream": {"model": "openai/bench", "api_base": f"http://127.0.0.1:{up}/v1"},
            "retrieval": {"index": tenant},
            **extra,
        }
        (work / "policies" / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), "utf-8")


class Probe:
    """bench.healthz_probe in a process of its own, one per phase."""

    started: ClassVar[list[Probe]] = []

    def __init__(self, port: int, out: Path) -> None:
        self.out = out
        Probe.started.append(self)
        cmd = [sys.executable, "-m", "bench.healthz_probe", f"http://127.0.0.1:{port}"]
        self.proc = subprocess.Popen([*cmd, str(out), "--every", "0.02"], cwd=REPO_ROOT)

    def end(self) -> list[float]:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        return [float(x) for x in self.out.read_text().split()]


async def _post(c: httpx.AsyncClient, port: int, tenant: str, r: rq.RagRequest) -> dict[str, Any]:
    began = time.perf_counter()
    resp = await c.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json=r.body(),
        headers={"authorization": f"Bearer sk-{tenant}"},
    )
    ms = (time.perf_counter() - began) * 1000.0
    if resp.status_code != 200:
        raise SystemExit(f"{tenant} {r.tag}: HTTP {resp.status_code} {resp.text[:300]}")
    body = resp.json()
    if "I do not know" in body["choices"][0]["message"]["content"]:
        raise SystemExit(f"{r.tag}: the fake upstream did not send the scripted answer")
    verdict = body["groundproxy"]
    guard_ms = float(resp.headers.get("x-groundproxy-latency-ms", "nan"))
    return {"ms": ms, "guard_ms": guard_ms, "unverified": bool(verdict["unverified"])}


async def small_run(
    port: int, reqs: list[rq.RagRequest], every_s: float = 0.0
) -> list[dict[str, Any]]:
    """``reqs`` one at a time, each sent ``every_s`` after the previous one was (or at once
    when that one took longer)."""
    out = []
    async with httpx.AsyncClient(timeout=120) as c:
        for r in reqs:
            began = time.perf_counter()
            out.append(await _post(c, port, "small", r))
            await asyncio.sleep(max(0.0, every_s - (time.perf_counter() - began)))
    return out


async def phases(port: int, work: Path, a: argparse.Namespace, cases: dict[str, Any]) -> Any:
    res: dict[str, Any] = {}
    await small_run(port, cases["warm"])  # models, caches of code paths: not measured
    probe = Probe(port, work / "healthz-alone.txt")
    await asyncio.sleep(0.5)
    res["alone"] = await small_run(port, cases["alone"], a.every)
    # a small tenant: guarding about a third of the time (on a loaded box its guards are
    # slower, and so is its pace — else it asks for most of the cores, and fair sharing
    # rightly gives it half)
    res["every"] = max(a.every, a.pace * _p([r["ms"] for r in res["alone"]]) / 1000.0)
    res["load_alone"] = load()
    res["healthz_alone"] = probe.end()
    big: list[rq.RagRequest] = list(cases["big"])
    done: list[dict[str, Any]] = []
    res["flood_errors"] = []
    stop = asyncio.Event()

    async def flood(c: httpx.AsyncClient) -> None:
        while not stop.is_set() and big:
            try:
                done.append(await _post(c, port, "big", big.pop()))
            except httpx.TransportError as exc:  # counted, printed; the flood goes on
                res["flood_errors"].append(type(exc).__name__)

    probe = Probe(port, work / "healthz-flood.txt")
    began = time.perf_counter()
    async with h.client(a.flood, timeout_s=300) as fc:
        tasks = [asyncio.create_task(flood(fc)) for _ in range(a.flood)]
        await asyncio.sleep(a.settle)
        res["during"] = await small_run(port, cases["during"], res["every"])
        res["load_during"] = load()
        res["ran_out"] = not big
        stop.set()
        res["healthz_flood"] = probe.end()
        await asyncio.gather(*tasks)
    res["big"] = done
    res["flood_s"] = time.perf_counter() - began
    return res


def _p(xs: list[float], q: float = 50) -> float:
    return h.pct(xs, q) if xs else float("nan")


def report(res: dict[str, Any], a: argparse.Namespace) -> list[str]:
    alone = [r["ms"] for r in res["alone"]]
    during = [r["ms"] for r in res["during"]]
    big = res["big"]
    ratio = _p(during) / _p(alone)
    guard = {k: _p([r["guard_ms"] for r in res[k]]) for k in ("alone", "during")}
    lines = [
        f"small tenant (distinct ~100-word contexts, 3 claims), one at a time, n={len(alone)}, "
        f"a request every {a.every:g} s alone, {res['every']:.2f} s during the flood "
        f"(at least {a.pace:g} x its alone p50):",
        f"  alone         p50 {_p(alone):7.1f} ms  p90 {_p(alone, 90):7.1f} ms  "
        f"unverified {sum(r['unverified'] for r in res['alone'])}/{len(alone)}  "
        f"({res['load_alone']})",
        f"  during flood  p50 {_p(during):7.1f} ms  p90 {_p(during, 90):7.1f} ms  "
        f"unverified {sum(r['unverified'] for r in res['during'])}/{len(during)}  "
        f"({res['load_during']})",
        f"  p50 ratio x{ratio:.2f} (goal <= 1.2); the guard's own p50 (x-groundproxy-latency-ms)"
        f" {guard['alone']:.1f} ms alone, {guard['during']:.1f} ms during",
        f"big tenant (distinct ~8,000-word contexts, 5 claims), {a.flood} clients: "
        f"{len(big)} answered in {res['flood_s']:.1f} s, p50 {_p([r['ms'] for r in big]):.0f} "
        f"ms, unverified {sum(r['unverified'] for r in big)}/{len(big)}"
        + ("  [ran out of distinct inputs before the end]" if res["ran_out"] else "")
        + (f"  client errors: {res['flood_errors']}" if res["flood_errors"] else ""),
    ]
    for name in ("alone", "flood"):
        xs = res[f"healthz_{name}"]
        lines.append(
            f"/healthz {name:<6} n={len(xs):<5} p50 {_p(xs):6.1f} ms  p99 {_p(xs, 99):6.1f} ms  "
            f"max {max(xs):6.1f} ms" + ("  (goal p99 < 50 ms)" if name == "flood" else "")
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30, help="small-tenant requests per phase")
    ap.add_argument(
        "--every", type=float, default=0.25, help="small tenant: a request per this many s"
    )
    ap.add_argument(
        "--pace",
        type=float,
        default=3.0,
        help="during the flood: at most a request per this x alone p50",
    )
    ap.add_argument("--flood", type=int, default=4, help="big-tenant concurrent clients")
    ap.add_argument("--big", type=int, default=70, help="distinct big requests prepared")
    ap.add_argument("--settle", type=float, default=2.0, help="flood seconds before measuring")
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--shared", type=Path, default=None, help="the data folder (../shared/data)")
    ap.add_argument("--env", action="append", default=[], help="server setting K=V")
    ap.add_argument("--label", default="", help="a name for this run in the output")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.shared is not None:
        rq.SHARED = a.shared
    # disjoint documents for the two tenants (shards), distinct passages within each
    _, small = rq.rag_requests(2 * a.n + 3, 100, claims=3, seed=a.seed, shard=(1, 2))
    _, big = rq.rag_requests(a.big, 8000, seed=a.seed + 1, start=50_000, shard=(0, 2))
    cases = {"warm": small[:3], "alone": small[3 : 3 + a.n], "during": small[3 + a.n :]}
    cases["big"] = big[::-1]  # popped from the end: sent in order
    env = dict(kv.split("=", 1) for kv in a.env)
    work = Path(tempfile.mkdtemp(prefix="gp-fair-bench-"))
    up = free_port()
    _setup(work, small + big, up)
    upstream = start_fake_upstream(up, work / "script.json", log_path=work / "upstream.log")
    port = free_port()
    proxy = start_proxy(port, work / "policies", work / "data", env, log_path=work / "gp.log")
    head = (
        f"# bench.fairness {a.label} — {time.strftime('%Y-%m-%d %H:%M')} UTC, "
        f"groundproxy serve from {REPO_ROOT}, env {env or '{}'}, {load()}"
    )
    try:
        res = asyncio.run(phases(port, work, a, cases))
    finally:
        stop_process(proxy)
        stop_process(upstream)
        for probe in Probe.started:  # a run that failed leaves no prober behind
            stop_process(probe.proc)
    lines = [head, *report(res, a)]
    print("\n".join(lines), flush=True)
    if a.out is not None:
        with a.out.open("a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
