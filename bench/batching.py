"""Micro-batching bench: concurrent guards in-process, batching off vs on, side by side.

    .venv/bin/python -m bench.batching [--answers 96] [--concurrency 16]
        [--windows 0,2,5] [--verifiers default,embedhead]

Each run pushes ``--answers`` real eval answers (with their context as the request's own
evidence) through ``GuardService.guard`` — the server's path: anyio worker threads, the real
ONNX MiniLM embedder, the policy's verifier — ``--concurrency`` at a time, and reports
answers/s, guard latency p50/p95 and the mean embedder/verifier batch sizes. Windows run
interleaved (twice each, best kept) because the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np
import structlog

from bench.needs_data import SHARED, require
from groundproxy.guards import entities, rules
from groundproxy.guards.verdict.cache import VerdictCache
from groundproxy.policies.schema import local_policy
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings


def rows(n: int) -> list[tuple[str, str, str]]:
    out = []
    for line in (require(SHARED) / "eval" / "halueval-qa.jsonl").open(encoding="utf-8"):
        r = json.loads(line)
        out.append((str(r["response"]), str(r.get("query") or ""), str(r["context"])))
        if len(out) >= n:
            break
    return out


def batch_means(metrics: Metrics) -> dict[str, tuple[float, float]]:
    got: dict[str, dict[str, float]] = {}
    for metric in metrics.registry.collect():
        for s in metric.samples:
            if s.name.startswith("groundproxy_batch_size_") and "model" in s.labels:
                got.setdefault(s.labels["model"], {})[s.name.rsplit("_", 1)[1]] = s.value
    return {m: (v.get("sum", 0.0), v.get("count", 0.0)) for m, v in got.items()}


def forget_recent(service: GuardService) -> None:
    """Empty the per-text caches a repeated answer would hit: the embedder's vector LRU
    (retrieval.vector_lru) and the rules' parse caches. Without this, rounds after the first
    measured the caches (505 "answers/s" where the guard does ~15)."""
    for embedder in (service.parts.embedder, getattr(service.parts.embedder, "inner", None)):
        lru = getattr(embedder, "lru", None)
        if lru is not None:
            lru.clear()
    for fn in (rules._quantities, entities.normalize, entities._fold):
        fn.cache_clear()


def run(
    service: GuardService, verifier: str, data: list[tuple[str, str, str]], concurrency: int
) -> dict[str, float]:
    policy = local_policy("bench", verifier={"model": verifier}, latency_budget_ms=600_000)
    lat: list[float] = []
    service.parts.verdict_cache = VerdictCache()  # every run scores every pair
    forget_recent(service)  # ... and embeds and parses every text again
    before = batch_means(service.parts.metrics)

    async def main() -> None:
        limit = anyio.Semaphore(concurrency)

        async def one(answer: str, question: str, context: str) -> None:
            async with limit:
                t = time.perf_counter()
                report = await service.guard(answer, question, [("system", context)], policy)
                lat.append(time.perf_counter() - t)
                assert report.action != "unverified", report

        async with anyio.create_task_group() as tg:
            for r in data:
                tg.start_soon(one, *r)

    t = time.perf_counter()
    anyio.run(main)
    wall = time.perf_counter() - t
    after = batch_means(service.parts.metrics)
    out = {
        "answers_per_s": len(data) / wall,
        "p50_ms": float(np.percentile(lat, 50)) * 1000,
        "p95_ms": float(np.percentile(lat, 95)) * 1000,
    }
    for m in ("embedder", "verifier"):
        s0, c0 = before.get(m, (0.0, 0.0))
        s1, c1 = after.get(m, (0.0, 0.0))
        out[f"{m}_batch"] = (s1 - s0) / (c1 - c0) if c1 > c0 else float("nan")
    return out


def _mean(x: float) -> str:
    return "- (unbatched)" if np.isnan(x) else f"{x:.1f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--answers", type=int, default=96)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--windows", default="0,2,5")
    p.add_argument("--verifiers", default="default,embedhead")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    require(SHARED)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from groundproxy.retrieval.embedder import load_embedder

    data = rows(args.answers)
    embedder = load_embedder("minilm")
    windows = [float(w) for w in args.windows.split(",")]
    print(
        f"cpus {os.cpu_count()}, load average at start {os.getloadavg()[0]:.1f} (shared "
        f"machine); {len(data)} halueval-qa answers, {args.concurrency} concurrent guards, "
        f"embedder {embedder.name} (onnxruntime)",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as d:
        services = {
            w: build_guard(Settings(data=Path(d), batch_window_ms=w), embedder=embedder)
            for w in windows
        }
        for verifier in args.verifiers.split(","):
            for s in services.values():
                s.warm_up([verifier])
            best: dict[float, dict[str, float]] = {}
            for _ in range(args.rounds):
                for w, s in services.items():
                    r = run(s, verifier, data, args.concurrency)
                    if w not in best or r["answers_per_s"] > best[w]["answers_per_s"]:
                        best[w] = r
            print(f"\nverifier {verifier}: best of {args.rounds} interleaved rounds")
            print(
                "| window ms | answers/s | vs off | guard p50 ms | guard p95 ms | "
                "mean embedder batch | mean verifier batch |"
            )
            print("|---|---|---|---|---|---|---|")
            base = best[windows[0]]["answers_per_s"]
            for w in windows:
                r = best[w]
                print(
                    f"| {w:g} | {r['answers_per_s']:.1f} | {r['answers_per_s'] / base:.2f}x | "
                    f"{r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {_mean(r['embedder_batch'])} | "
                    f"{_mean(r['verifier_batch'])} |",
                    flush=True,
                )
        for s in services.values():
            s.close()


if __name__ == "__main__":
    main()
