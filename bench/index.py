"""Index bench: hnswlib query latency at 100k and 1M chunks, memory per million chunks,
ingest throughput with the real embedder, lazy loading and LRU eviction of tenant indexes.

    .venv/bin/python -m bench.index [--sizes 100000,1000000] [--ingest-chunks 2000]

Vectors for the size runs are synthetic (random unit 384-d vectors, as the embedder makes);
ingest uses the real all-MiniLM-L6-v2 on ``../shared/data`` contexts. Prints one table.
Not part of the default test run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
DIM = 384
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def bench_size(n: int, queries: int, tmp: Path) -> dict[str, float]:
    from retrieval.vector_index import HnswVectorIndex

    rng = np.random.default_rng(n)
    before = rss_mb()
    index = HnswVectorIndex(DIM, max_elements=n)
    t0 = time.perf_counter()
    step = 50_000
    for start in range(0, n, step):
        m = min(step, n - start)
        index.add(range(start, start + m), unit(rng, m))
    build_s = time.perf_counter() - t0
    mem = rss_mb() - before
    path = tmp / f"idx-{n}.bin"
    index.save(path)
    size_mb = path.stat().st_size / 2**20
    qs = unit(rng, queries)
    lat = []
    for i in range(queries):
        t = time.perf_counter()
        index.query(qs[i : i + 1], 3)
        lat.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    index.query(qs, 3)
    batch_ms = (time.perf_counter() - t) * 1000 / queries
    del index
    path.unlink()
    return {
        "chunks": n, "build_s": build_s, "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99),
        "batched_ms_per_query": batch_ms, "rss_mb": mem, "file_mb": size_mb,
        "rss_mb_per_million": mem * 1e6 / n, "file_mb_per_million": size_mb * 1e6 / n,
    }


def contexts(limit_chars: int) -> list[tuple[str, str]]:
    docs: list[tuple[str, str]] = []
    total = 0
    for f in sorted((SHARED / "eval").glob("*.jsonl")):
        for i, line in enumerate(f.open(encoding="utf-8")):
            ctx = json.loads(line).get("context") or ""
            if not ctx:
                continue
            docs.append((f"{f.stem}-{i}", ctx))
            total += len(ctx)
            if total >= limit_chars:
                return docs
    return docs


def bench_ingest(chunks: int, tmp: Path) -> dict[str, float]:
    from retrieval.embedder import load_embedder
    from retrieval.ingest import ingest_texts

    embedder = load_embedder("minilm")
    embedder.encode(["warm up"])
    docs = contexts(chunks * 400)  # ~400 characters a chunk: enough text, trimmed below
    t = time.perf_counter()
    result = ingest_texts(tmp / "ingest", "bench", docs, embedder)
    s = time.perf_counter() - t
    return {"docs": len(docs), "chunks": result.chunks_added, "seconds": s,
            "chunks_per_s": result.chunks_added / s}


def bench_lru(tmp: Path, tenants: int = 6, per_tenant: int = 20_000) -> dict[str, float]:
    from retrieval.hashing_embedder import HashingEmbedder
    from retrieval.manager import IndexManager
    from retrieval.tenant_index import IndexWriter

    emb = HashingEmbedder()
    data = tmp / "lru"
    for t in range(tenants):
        with IndexWriter(data, f"t{t}", emb) as w:
            text = " ".join(f"Sentence {i} of tenant {t}." for i in range(per_tenant // 10))
            w.upsert("doc", text)
            w.commit()
    mgr = IndexManager(data, None, max_loaded=2)
    cold, warm = [], []
    for t in range(tenants):
        s = time.perf_counter()
        mgr.get(f"t{t}")
        cold.append((time.perf_counter() - s) * 1000)
        s = time.perf_counter()
        mgr.get(f"t{t}")
        warm.append((time.perf_counter() - s) * 1000)
    return {"tenants": tenants, "loaded_after": len(mgr.loaded()), "cold_open_ms": pct(cold, 50),
            "warm_get_ms": pct(warm, 50)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--ingest-chunks", type=int, default=2000)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print("| chunks | build s | query p50 ms | query p99 ms | batched ms/q | RSS MB | "
              "file MB | RSS MB / 1M | file MB / 1M |")
        print("|---|---|---|---|---|---|---|---|---|")
        for n in (int(x) for x in args.sizes.split(",")):
            r = bench_size(n, args.queries, tmp)
            print(f"| {n:,} | {r['build_s']:.1f} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | "
                  f"{r['batched_ms_per_query']:.3f} | {r['rss_mb']:.0f} | {r['file_mb']:.0f} | "
                  f"{r['rss_mb_per_million']:.0f} | {r['file_mb_per_million']:.0f} |", flush=True)
        if args.ingest_chunks:
            r = bench_ingest(args.ingest_chunks, tmp)
            print(f"\ningest (real MiniLM embedder, IndexWriter, one commit): {r['docs']} docs, "
                  f"{r['chunks']} chunks in {r['seconds']:.1f} s = {r['chunks_per_s']:.0f} "
                  "chunks/s (goal ≥ 300 with the ONNX/quantized embedder)", flush=True)
        r = bench_lru(tmp)
        print(f"\nlazy loading / LRU (max_loaded=2, {r['tenants']} tenants): cold open p50 "
              f"{r['cold_open_ms']:.1f} ms, cached get p50 {r['warm_get_ms']:.3f} ms, "
              f"{r['loaded_after']} held after touching all")


if __name__ == "__main__":
    main()
