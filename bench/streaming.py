"""Streaming overhead: time to first token and total time, sentence vs buffer vs no guard.

    nice -n 5 .venv/bin/python -m bench.streaming [--n 20] [--token-delay 0.01]

Real processes: the fake upstream streams a 4-sentence warranty answer word by word with
``--token-delay`` seconds before each word (model ``drip-<delay>``); one
``groundproxy serve`` process with two tenants on an index of the sample documents —
``buffer`` (``stream: buffer``) and ``sentence`` (``stream: sentence``) — and direct
streamed calls to the upstream ("no guard"). Requests are interleaved (direct, buffer,
sentence) so machine noise hits all three alike. TTFT = time to the first non-empty
content delta; total = time to ``[DONE]``. Prints p50/p90 of each and the overheads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process

SAMPLES = Path(__file__).resolve().parents[1] / "proxy" / "samples"
QUESTION = "How long is the warranty?"
ANSWER = (
    "The Acme vacuum robot has a limited warranty of 24 months from the date of purchase. "
    "Batteries are covered for 6 months. Returns are accepted within 30 days of delivery. "
    "The robot can be charged from any standard outlet."
)


def _pct(xs: list[float], q: int) -> float:
    return statistics.quantiles(xs, n=100)[q - 1] if len(xs) > 1 else xs[0]


def one(http: httpx.Client, url: str, headers: dict[str, str], model: str) -> tuple[float, float]:
    body = {"model": model, "stream": True,
            "messages": [{"role": "user", "content": QUESTION}]}  # fmt: skip
    t0 = time.perf_counter()
    ttft = None
    with http.stream("POST", url, json=body, headers=headers) as r:
        if r.status_code != 200:
            raise SystemExit(f"{url} → {r.status_code}: {r.read().decode()[:500]}")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            data = json.loads(line[6:])
            choices = data.get("choices") or []
            if ttft is None and choices and (choices[0].get("delta") or {}).get("content"):
                ttft = time.perf_counter() - t0
    total = time.perf_counter() - t0
    return 1000 * (ttft if ttft is not None else total), 1000 * total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--token-delay", type=float, default=0.01)
    args = ap.parse_args(argv)
    from groundproxy.retrieval.embedder import load_embedder
    from groundproxy.retrieval.ingest import ingest_paths

    work = Path(tempfile.mkdtemp(prefix="gp-bench-stream-"))
    (work / "policies").mkdir()
    script = work / "script.json"
    script.write_text(json.dumps({"default": ANSWER, "rules": []}), encoding="utf-8")
    ingest_paths(
        work / "data",
        "docs",
        [SAMPLES / "handbook.md", SAMPLES / "products.md"],
        load_embedder(),
        progress=False,
    )
    up_port, gp_port = free_port(), free_port()
    model = f"drip-{args.token_delay:g}"
    for tenant in ("buffer", "sentence"):
        policy: dict[str, Any] = {
            "tenant": tenant, "keys": [hash_key(f"key-{tenant}")], "stream": tenant,
            "upstream": {"model": f"openai/{model}", "api_key_env": "BENCH_UPSTREAM_KEY",
                         "api_base": f"http://127.0.0.1:{up_port}/v1"},
            "retrieval": {"index": "docs", "shared_with": [  # both use one index
                "sentence" if tenant == "buffer" else "buffer"]}, "latency_budget_ms": 10000,
        }  # fmt: skip
        (work / "policies" / f"{tenant}.yaml").write_text(yaml.safe_dump(policy), "utf-8")
    upstream = start_fake_upstream(up_port, script)
    proxy = start_proxy(gp_port, work / "policies", work / "data")
    gp = f"http://127.0.0.1:{gp_port}/v1/chat/completions"
    targets = {
        "no guard (direct)": (f"http://127.0.0.1:{up_port}/v1/chat/completions", {}),
        "buffer": (gp, {"authorization": "Bearer key-buffer"}),
        "sentence": (gp, {"authorization": "Bearer key-sentence"}),
    }
    res: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in targets}
    try:
        with httpx.Client(timeout=60) as http:
            for i in range(args.n + 3):
                for name, (url, headers) in targets.items():
                    ttft, total = one(http, url, headers, model)
                    if i >= 3:  # warm-up excluded
                        res[name][0].append(ttft)
                        res[name][1].append(total)
    finally:
        stop_process(proxy)
        stop_process(upstream)
    words = len(ANSWER.split())
    delay_ms = args.token_delay * 1000
    print(
        f"{args.n} streamed requests each, interleaved; {words} words, {delay_ms:g} ms "
        f"before each (upstream ≈ {words * delay_ms:.0f} ms); 4 sentences"
    )
    print(f"{'path':<20}{'TTFT p50':>10}{'p90':>8}{'total p50':>11}{'p90':>8}")
    for name, (ttft, total) in res.items():
        print(
            f"{name:<20}{statistics.median(ttft):>10.0f}{_pct(ttft, 90):>8.0f}"
            f"{statistics.median(total):>11.0f}{_pct(total, 90):>8.0f}"
        )
    base_t, base_total = res["no guard (direct)"]
    for name in ("buffer", "sentence"):
        ttft, total = res[name]
        d_ttft = [a - b for a, b in zip(ttft, base_t, strict=True)]
        d_total = [a - b for a, b in zip(total, base_total, strict=True)]
        label = name + " − direct"
        print(
            f"{label:<20}{statistics.median(d_ttft):>10.0f}{_pct(d_ttft, 90):>8.0f}"
            f"{statistics.median(d_total):>11.0f}{_pct(d_total, 90):>8.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
