"""RAG latency through one real ``groundproxy serve`` process (issue 30), all figures in one run.

An instant fake upstream, and tenants on one server: ``plain`` (guard off), ``rag`` (guard
on, default 800 ms budget, request context only), ``idx`` (guard on, a 600-document index),
``flood`` and ``quiet`` (two guarded tenants for the fairness and hang-up figures).

1. **Request context** — distinct answers AND distinct contexts (bench.rag_requests) of
   500 / 2,000 / 8,000 words, and 2,000 words with 80 % of the passages resent; each request
   down ``plain`` and ``rag`` interleaved: p50 added (rag − plain), the guard's own header,
   unverified and top-N (capped) counts. The stage breakdown (split / pre-selection /
   embedding / verifier / rules / rest) and the before/after ratio come from
   bench.rag_stages, in process, in this same run.
2. **Index path** — distinct 5-claim answers (bench.answers): p50 added at concurrency 1,
   and verified answers per second at concurrency 16 (160 more, each sent once); ingest
   chunks/s of the index (CPU, in this process, before the server starts). Every case draws
   its passages from its own share of the source documents (no case finds another's
   sentences in the tenant's cache), and a reply that is not the scripted answer stops the
   run.
3. **/healthz** p99 (bench.healthz_probe, a process of its own) while a 20,000-word answer
   is guarded, and while 8,000-word contexts arrive at concurrency 16.
4. **Abandoned work** — a request with 5,000 context passages and a 200-sentence answer
   (~60 claims guarded, the rest past ``max_answer_chars``; 20 s budget), once answered (its
   CPU-seconds) then hung up by its client after 0.3 s: how long the server's CPU keeps
   running after the hang-up.
5. **Fairness** — the quiet tenant's p50 (distinct 100-word contexts, 3-claim answers)
   alone and while the flood tenant sends 8,000-word contexts at concurrency 8.

    nice -n 5 .venv/bin/python -m bench.rag_latency [--n 20] [--c16-n 160] [--docs 600] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench import harness as h
from bench import rag_stages
from bench.answers import distinct_answers
from bench.guard_latency import _docs
from bench.long_answer import long_answer
from bench.rag_requests import RagRequest, rag_requests
from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import (
    REPO_ROOT,
    free_port,
    start_fake_upstream,
    start_proxy,
    stop_process,
)

TENANTS: dict[str, dict[str, Any]] = {
    "plain": {"guard": False},
    "rag": {},
    "idx": {},
    "quiet": {},
    "flood": {"latency_budget_ms": 20_000},
}
HANG = [
    f"Branch number {i} of Acme employs {i % 97 + 3} engineers in town {i}." for i in range(5000)
]
QUIET = "The meeting is on Tuesday at 10:00 in room 4."


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def _script(cases: dict[str, list[RagRequest]], idx: list[Any]) -> dict[str, Any]:
    rules = [{"match": f"[{r.tag}]", "answer": r.answer} for rs in cases.values() for r in rs]
    rules += [{"match": a.tag, "answer": a.text} for a in idx]
    rules += [
        {"match": "[long]", "answer": long_answer(1)},
        {"match": "[quiet]", "answer": QUIET},
        {"match": "[hang]", "answer": " ".join(HANG[::25])},
    ]
    return {"default": "I do not know.", "rules": rules}


def _setup(work: Path, cases: dict[str, list[RagRequest]], idx: list[Any], up: int) -> None:
    (work / "script.json").write_text(json.dumps(_script(cases, idx)), encoding="utf-8")
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


def _target(port: int, tenant: str) -> h.Target:
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    return h.Target(tenant, url, {"authorization": f"Bearer sk-{tenant}"})


async def _post(
    c: httpx.AsyncClient, t: h.Target, body: dict[str, Any]
) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    r = await c.post(t.url, json=body, headers=t.headers)
    return (time.perf_counter() - began) * 1000.0, r


async def rag_case(port: int, warm: list[RagRequest], reqs: list[RagRequest]) -> dict[str, Any]:
    plain, rag = _target(port, "plain"), _target(port, "rag")
    out: dict[str, Any] = {"added": [], "header": [], "unverified": 0, "capped": 0, "n": 0}
    async with httpx.AsyncClient(timeout=60) as c:
        for r in warm:
            await _post(c, rag, r.body())
        for i, r in enumerate(reqs):
            p_ms, _ = await _post(c, plain, r.body())
            g_ms, resp = await _post(c, rag, r.body())
            if i < 2:
                continue  # warm-up
            body = resp.json()
            if "I do not know" in body["choices"][0]["message"]["content"]:  # the default
                raise SystemExit(f"{r.tag}: the fake upstream did not send the scripted answer")
            verdict = body["groundproxy"]
            out["n"] += 1
            out["added"].append(g_ms - p_ms)
            out["header"].append(float(resp.headers["x-groundproxy-latency-ms"]))
            out["unverified"] += int(verdict["unverified"])
            out["capped"] += int("x-groundproxy-context" in resp.headers)
    return out


async def index_path(port: int, answers: list[Any], sequential: int) -> dict[str, Any]:
    """p50 added of the first ``sequential`` answers one at a time, then verified answers
    per second with the rest (each sent once) at concurrency 16."""
    plain, idx = _target(port, "plain"), _target(port, "idx")
    added: list[float] = []
    async with httpx.AsyncClient(timeout=60) as c:
        for i, a in enumerate(answers[:sequential]):
            p_ms, _ = await _post(c, plain, h.body(question=a.question))
            g_ms, _ = await _post(c, idx, h.body(question=a.question))
            if i >= 2:
                added.append(g_ms - p_ms)
    verified = 0
    rest = answers[sequential:]

    async def worker(c: httpx.AsyncClient, k: int) -> None:
        nonlocal verified
        for a in rest[k::16]:
            _, r = await _post(c, idx, h.body(question=a.question))
            verified += int(r.status_code == 200 and not r.json()["groundproxy"]["unverified"])

    async with h.client(16) as c:
        began = time.perf_counter()
        await asyncio.gather(*(worker(c, k) for k in range(16)))
        wall = time.perf_counter() - began
    return {"added": added, "verified_rps": verified / wall, "c16_n": len(rest)}


def _probe(port: int, work: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    out = work / f"healthz-{name}.txt"
    cmd = [
        sys.executable,
        "-m",
        "bench.healthz_probe",
        f"http://127.0.0.1:{port}",
        str(out),
        "--every",
        "0.02",
    ]
    return subprocess.Popen(cmd, cwd=REPO_ROOT), out


def _probe_end(proc: subprocess.Popen[bytes], out: Path) -> list[float]:
    proc.terminate()
    proc.wait(timeout=30)
    return [float(x) for x in out.read_text().split()]


async def healthz(port: int, work: Path, big: list[RagRequest]) -> dict[str, list[float]]:
    res: dict[str, list[float]] = {}
    proc, out = _probe(port, work, "long")
    await asyncio.sleep(0.5)
    async with httpx.AsyncClient(timeout=120) as c:
        for _ in range(3):
            await _post(c, _target(port, "quiet"), h.body(question="[long] everything"))
    res["20k-word answer"] = _probe_end(proc, out)
    proc, out = _probe(port, work, "context")
    async with h.client(16) as c:
        await asyncio.gather(*(_post(c, _target(port, "rag"), r.body()) for r in big))
    res["8,000-word contexts, c=16"] = _probe_end(proc, out)
    return res


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def abandoned(port: int, pid: int, tries: int = 3) -> tuple[float, list[float]]:
    """(CPU-seconds of the request answered; seconds from each hang-up until the server's
    CPU is idle: < 10 % of a core over 50 ms)."""
    messages = [{"role": "tool", "tool_call_id": f"t{i}", "content": s} for i, s in enumerate(HANG)]
    body = {"model": "bench", "messages": [*messages, {"role": "user", "content": "[hang] all?"}]}
    before = _cpu_s(pid)
    async with httpx.AsyncClient(timeout=120) as c:
        await _post(c, _target(port, "flood"), body)
    whole = _cpu_s(pid) - before
    out: list[float] = []
    for _ in range(tries):
        async with httpx.AsyncClient(timeout=0.3) as c:
            with contextlib.suppress(httpx.ReadTimeout):  # the client hangs up
                await _post(c, _target(port, "flood"), body)
        gone = time.perf_counter()
        last, at = _cpu_s(pid), gone
        while time.perf_counter() - gone < 10.0:
            await asyncio.sleep(0.05)
            now = _cpu_s(pid)
            if now - last < 0.005:  # < 10 % of a core over 50 ms: the guard stopped
                break
            last, at = now, time.perf_counter()
        out.append(at - gone)
        await asyncio.sleep(0.5)
    return whole, out


async def fairness(port: int, quiet: list[RagRequest], big: list[RagRequest]) -> dict[str, Any]:
    """The quiet tenant's latencies (distinct requests) alone, then during a flood."""
    target = _target(port, "quiet")
    half = len(quiet) // 2
    res: dict[str, Any] = {"alone": [], "flood": [], "unverified": 0}
    async with httpx.AsyncClient(timeout=60) as c:
        for r in quiet[:half]:
            res["alone"].append((await _post(c, target, r.body()))[0])
        stop = asyncio.Event()

        async def flood(k: int) -> None:
            while not stop.is_set():
                await _post(c, _target(port, "flood"), big[k % len(big)].body())
                k += 8

        tasks = [asyncio.create_task(flood(k)) for k in range(8)]
        await asyncio.sleep(1.0)
        for r in quiet[half:]:
            ms, resp = await _post(c, target, r.body())
            res["flood"].append(ms)
            res["unverified"] += int(resp.json()["groundproxy"]["unverified"])
        stop.set()
        await asyncio.gather(*tasks)
    return res


def _p(xs: list[float], q: float = 50) -> float:
    return h.pct(xs, q) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--c16-n", type=int, default=160, help="distinct answers sent at c=16")
    ap.add_argument("--docs", type=int, default=600, help="documents in the index")
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "rag_latency.txt"
    )
    a = ap.parse_args()
    lines = [f"# bench.rag_latency — {time.strftime('%Y-%m-%d %H:%M')}, {load()}"]
    cases: dict[str, list[RagRequest]] = {}
    warms: dict[str, list[RagRequest]] = {}
    for k, (words, reuse) in enumerate(((500, 0.0), (2000, 0.0), (8000, 0.0), (2000, 0.8))):
        name = f"{words} words, {reuse:.0%} reuse"
        warms[name], cases[name] = rag_requests(
            a.n + 2, words, reuse=reuse, seed=100 + k, start=10_000 * (k + 1), shard=(k, 6)
        )
    _, big = rag_requests(24, 8000, seed=300, start=90_000, shard=(4, 6))  # ~500 of 540 runs
    cases["big"] = big
    _, cases["quiet"] = rag_requests(24, 100, claims=3, seed=400, start=95_000, shard=(5, 6))
    docs = _docs(a.docs)
    idx = distinct_answers(docs, a.n + 2 + a.c16_n)
    work = Path(tempfile.mkdtemp(prefix="gp-rag-bench-"))
    from groundproxy.retrieval.embedder import load_embedder
    from groundproxy.retrieval.ingest import ingest_texts

    began = time.perf_counter()
    res = ingest_texts(work / "data", "idx", docs, load_embedder())
    ingest_s = time.perf_counter() - began
    lines.append(
        f"ingest (CPU, minilm): {res.chunks_added} chunks in {ingest_s:.1f} s = "
        f"{res.chunks_added / ingest_s:.1f} chunks/s ({load()})"
    )
    up = free_port()
    warm_cases = {f"warm-up {name}": rs for name, rs in warms.items()}
    _setup(work, {**cases, **warm_cases}, idx, up)
    upstream = start_fake_upstream(up, work / "script.json")
    port = free_port()
    proxy = start_proxy(port, work / "policies", work / "data", log_path=work / "gp.log")
    try:
        lines += asyncio.run(_all(Run(port, proxy.pid, work, cases, warms, idx, a.n + 2)))
    finally:
        stop_process(proxy)
        stop_process(upstream)
    print("\n".join(lines[-3:]), flush=True)
    lines.append(f"\n## in process, before vs now (bench.rag_stages, n={a.n // 2}; {load()})")
    lines += rag_stages.stages_table(a.n // 2, (500, 2000, 8000))
    a.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


@dataclass
class Run:
    port: int
    pid: int
    work: Path
    cases: dict[str, list[RagRequest]]
    warms: dict[str, list[RagRequest]]
    idx: list[Any]
    sequential: int  # index-path answers sent one at a time (the rest at c=16)


async def _all(run: Run) -> list[str]:
    port, cases = run.port, run.cases
    lines = [
        "\n## 1. request context through serve (p50 ms; added = rag − plain, interleaved)",
        f"{'case':<24}{'n':>4}{'added p50':>11}{'p90':>8}{'header p50':>12}"
        f"{'unverified':>12}{'top-N':>7}",
    ]
    for name, reqs in cases.items():
        if name in ("big", "quiet"):
            continue
        r = await rag_case(port, run.warms[name], reqs)
        lines.append(
            f"{name:<24}{r['n']:>4}{_p(r['added']):>11.1f}{_p(r['added'], 90):>8.1f}"
            f"{_p(r['header']):>12.1f}{r['unverified']:>9}/{r['n']:<2}{r['capped']:>7}"
        )
        print(lines[-1], f"({load()})", flush=True)
    ix = await index_path(port, run.idx, run.sequential)
    lines += [
        f"\n## 2. index path ({load()})",
        f"distinct 5-claim answers: p50 added {_p(ix['added']):.1f} ms (n={len(ix['added'])}); "
        f"verified answers at c=16: {ix['verified_rps']:.1f} req/s (n={ix['c16_n']})",
    ]
    hz = await healthz(port, run.work, cases["big"])
    lines.append(f"\n## 3. /healthz while guarding ({load()})")
    for name, xs in hz.items():
        lines.append(
            f"{name:<28} n={len(xs):<4} p50 {_p(xs):.1f} ms  p99 {_p(xs, 99):.1f} ms  "
            f"max {max(xs):.1f} ms"
        )
    whole, stops = await abandoned(port, run.pid)
    lines += [
        f"\n## 4. abandoned work ({load()})",
        f"5,000 passages, ~60 claims: {whole:.2f} CPU-s answered; CPU busy after the client "
        "hung up at 0.3 s: " + ", ".join(f"{s * 1000:.0f} ms" for s in stops),
    ]
    fair = await fairness(port, cases["quiet"], cases["big"])
    ratio = _p(fair["flood"]) / _p(fair["alone"])
    lines += [
        f"\n## 5. fairness ({load()})",
        f"quiet tenant (distinct 100-word contexts, 3 claims) p50 alone "
        f"{_p(fair['alone']):.1f} ms, during the other tenant's 8,000-word flood at c=8 "
        f"{_p(fair['flood']):.1f} ms (x{ratio:.2f}; unverified {fair['unverified']}/"
        f"{len(fair['flood'])})",
    ]
    return lines


if __name__ == "__main__":
    main()
