"""Index bench: hnswlib query latency at 100k and 1M chunks, memory per million chunks,
ingest throughput with the real embedder, lazy loading and LRU eviction of tenant indexes.

    .venv/bin/python -m bench.index [--sizes 100000,1000000] [--max-build-s 1200]
        [--ingest-chunks 1000] [--embedders minilm-torch,minilm,minilm-int8]

Vectors for the size runs are synthetic (random unit 384-d vectors, as the embedder makes),
added through the product's ``HnswVectorIndex`` (M=16, ef_construction=200, one thread, as
the writer does) in steps of 50k; a build still running after ``--max-build-s`` stops at the
step it reached and the table says so (rate, extrapolated full build time; memory per
million is then measured at the size reached). Ingest runs ``retrieval.ingest.ingest_texts``
(chunking, embedding, SQLite, HNSW, one atomic commit) with each real embedder on the same
``../shared/data`` eval contexts. The LRU part copies one real 10k-chunk tenant index to
several tenants and opens them through ``IndexManager``: time to the first query of a cold
tenant, and RSS with ``max_loaded`` small vs large. Not part of the default test run.
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

from bench.needs_data import SHARED, require

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
DIM = 384


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


def clustered(rng: np.random.Generator, centers: np.ndarray, n: int) -> np.ndarray:
    """Points around random topic centres (cosine ~0.74 to their centre, ~0.55 to a
    neighbour): text embeddings cluster by topic; uniform random vectors are the worst case."""
    pick = rng.integers(0, centers.shape[0], size=n)
    v = centers[pick] + 0.9 * unit(rng, n)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def exact_top(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Brute-force top-k labels by cosine (the recall reference), in blocks."""
    best_s = np.full((queries.shape[0], 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((queries.shape[0], 0), dtype=np.int64)
    for start in range(0, data.shape[0], 100_000):
        sims = queries @ data[start : start + 100_000].T
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        best_s = np.concatenate([best_s, np.take_along_axis(sims, top, 1)], axis=1)
        best_i = np.concatenate([best_i, top + start], axis=1)
        keep = np.argsort(-best_s, axis=1)[:, :k]
        best_s = np.take_along_axis(best_s, keep, 1)
        best_i = np.take_along_axis(best_i, keep, 1)
    return best_i


def bench_size(
    n: int,
    queries: int,
    tmp: Path,
    max_build_s: float,
    *,
    threads: int = 1,
    ef_construction: int = 200,
    vectors: str = "uniform",
    recall_queries: int = 200,
) -> dict[str, float]:
    from groundproxy.retrieval.vector_index import HnswVectorIndex

    rng = np.random.default_rng(n)
    centers = unit(rng, 5000)

    def make(m: int) -> np.ndarray:
        return unit(rng, m) if vectors == "uniform" else clustered(rng, centers, m)

    data = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 50_000):
        data[start : start + 50_000] = make(min(50_000, n - start))
    before = rss_mb()
    index = HnswVectorIndex(
        DIM, max_elements=n, ef_construction=ef_construction, add_threads=threads
    )
    t0 = time.perf_counter()
    step = 50_000
    reached = 0
    for start in range(0, n, step):
        m = min(step, n - start)
        index.add(range(start, start + m), data[start : start + m])
        reached = start + m
        if time.perf_counter() - t0 > max_build_s and reached < n:
            break
    build_s = time.perf_counter() - t0
    mem = rss_mb() - before
    path = tmp / f"idx-{n}.bin"
    index.save(path)
    size_mb = path.stat().st_size / 2**20
    if vectors == "uniform":
        qs = unit(rng, queries)
    else:  # a claim near its evidence: a built point, perturbed (cosine ~0.9)
        near = data[rng.integers(0, reached, size=queries)] + 0.5 * unit(rng, queries)
        qs = (near / np.linalg.norm(near, axis=1, keepdims=True)).astype(np.float32)
    lat = []
    for i in range(queries):
        t = time.perf_counter()
        index.query(qs[i : i + 1], 3)
        lat.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    index.query(qs, 3)
    batch_ms = (time.perf_counter() - t) * 1000 / queries
    rq = qs[:recall_queries]
    got, _ = index.query(rq, 10)
    want = exact_top(data[:reached], rq, 10)
    recall = float(np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got, want, strict=True)]))
    del index, data
    path.unlink()
    return {
        "target": n,
        "chunks": reached,
        "build_s": build_s,
        "rate": reached / build_s,
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "batched_ms_per_query": batch_ms,
        "recall10": recall,
        "rss_mb": mem,
        "file_mb": size_mb,
        "rss_mb_per_million": mem * 1e6 / reached,
        "file_mb_per_million": size_mb * 1e6 / reached,
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


def bench_ingest(chunks: int, tmp: Path, names: list[str]) -> list[dict[str, float | str]]:
    """The real ingest path with each embedder, on the same documents, side by side."""
    from groundproxy.retrieval.embedder import load_embedder
    from groundproxy.retrieval.ingest import ingest_texts

    docs = contexts(chunks * 600)  # ~600 characters a chunk
    out: list[dict[str, float | str]] = []
    for name in names:
        t = time.perf_counter()
        embedder = load_embedder(name)
        embedder.encode(["warm up"])
        load_s = time.perf_counter() - t
        t, cpu = time.perf_counter(), time.process_time()
        result = ingest_texts(tmp / f"ingest-{name}", "bench", docs, embedder)
        s, cpu_s = time.perf_counter() - t, time.process_time() - cpu
        out.append(
            {
                "embedder": name,
                "name": embedder.name,
                "load_s": load_s,
                "docs": len(docs),
                "chunks": result.chunks_added,
                "seconds": s,
                "chunks_per_s": result.chunks_added / s,
                "cpu_s": cpu_s,
                "chunks_per_cpu_s": result.chunks_added / cpu_s,
            }
        )
    return out


def _tenant_source(data: Path, chunks: int) -> None:
    """One real tenant index ``t0`` of about ``chunks`` chunks (hashing embedder: fast)."""
    from groundproxy.retrieval.tenant_index import IndexWriter
    from groundproxy.testing.embedders import HashingEmbedder

    with IndexWriter(data, "t0", HashingEmbedder()) as w:
        for d in range(chunks // 12):
            w.upsert(
                f"doc{d}",
                " ".join(
                    f"Sentence {i} of document {d} is about topic {(d * 31 + i) % 997}, "
                    f"which has {i * 7 % 13} parts and a long enough body to fill chunks."
                    for i in range(60)
                ),
            )
        w.commit()


def bench_lru(tmp: Path, tenants: int = 8, chunks: int = 10_000) -> dict[str, float]:
    import gc
    import shutil

    from groundproxy.retrieval.manager import IndexManager
    from groundproxy.testing.embedders import HashingEmbedder

    data = tmp / "lru"
    t = time.perf_counter()
    _tenant_source(data, chunks)
    build_s = time.perf_counter() - t
    for i in range(1, tenants):
        shutil.copytree(data / "t0", data / f"t{i}")
    emb = HashingEmbedder()
    query = emb.encode(["topic 42 parts"])
    out: dict[str, float] = {"tenants": tenants, "build_s": build_s}
    for max_loaded in (2, tenants):
        gc.collect()
        before = rss_mb()
        mgr = IndexManager(data, emb, max_loaded=max_loaded)
        cold: list[float] = []
        warm: list[float] = []
        peak = before
        for rnd in range(2):
            for i in range(tenants):
                s = time.perf_counter()
                index = mgr.get(f"t{i}")
                index.search(query, 3, 0.0)
                (cold if rnd == 0 or max_loaded < tenants else warm).append(
                    (time.perf_counter() - s) * 1000
                )
                peak = max(peak, rss_mb())
        out["chunks_per_tenant"] = float(mgr.get("t0").count)
        out[f"cold_ms_{max_loaded}"] = pct(cold, 50)
        out[f"cold_p99_ms_{max_loaded}"] = pct(cold, 99)
        if warm:
            out["warm_ms"] = pct(warm, 50)
        out[f"rss_growth_mb_{max_loaded}"] = peak - before
        out[f"held_{max_loaded}"] = float(len(mgr.loaded()))
        del mgr, index
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--max-build-s", type=float, default=1200.0)
    p.add_argument("--ingest-chunks", type=int, default=1000)
    p.add_argument("--embedders", default="minilm-torch,minilm,minilm-int8")
    p.add_argument("--skip-lru", action="store_true")
    p.add_argument("--threads", default="1", help="add threads per build, comma-separated")
    p.add_argument("--ef-construction", type=int, default=200)
    p.add_argument("--vectors", default="uniform", help="uniform and/or clustered")
    args = p.parse_args()
    require(SHARED)
    print(
        f"cpus {os.cpu_count()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')}, "
        f"load average at start {os.getloadavg()[0]:.1f} (shared machine)",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        sizes = [int(x) for x in args.sizes.split(",") if x]
        if sizes:
            print(
                f"\nHNSW M=16, ef_construction={args.ef_construction}; recall@10 of 200 "
                "queries against brute force"
            )
            print(
                "| vectors | add threads | target | chunks built | build s | adds/s | "
                "full build s (extrap.) | query p50 ms | query p99 ms | batched ms/q | "
                "recall@10 | RSS MB | file MB | RSS MB / 1M | file MB / 1M |"
            )
            print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for n in sizes:
            for kind in args.vectors.split(","):
                for threads in (int(x) for x in args.threads.split(",")):
                    r = bench_size(
                        n, args.queries, tmp, args.max_build_s, threads=threads,
                        ef_construction=args.ef_construction, vectors=kind,
                    )  # fmt: skip
                    full = r["build_s"] if r["chunks"] == n else n / r["rate"]
                    mark = "" if r["chunks"] == n else " (stopped)"
                    print(
                        f"| {kind} | {threads} | {n:,} | {r['chunks']:,.0f}{mark} | "
                        f"{r['build_s']:.1f} | {r['rate']:.0f} | {full:.0f} | "
                        f"{r['p50_ms']:.3f} | {r['p99_ms']:.3f} | "
                        f"{r['batched_ms_per_query']:.3f} | {r['recall10']:.3f} | "
                        f"{r['rss_mb']:.0f} | {r['file_mb']:.0f} | "
                        f"{r['rss_mb_per_million']:.0f} | {r['file_mb_per_million']:.0f} |",
                        flush=True,
                    )
        if args.ingest_chunks:
            rows = bench_ingest(args.ingest_chunks, tmp, args.embedders.split(","))
            print(
                f"\ningest through retrieval.ingest.ingest_texts, {rows[0]['docs']} eval "
                "contexts, one commit (goal ≥ 300 chunks/s on 2 cores)"
            )
            print(
                "| embedder | vectors named | load s | chunks | seconds | chunks/s | vs first | "
                "CPU s | chunks per CPU s |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            base = float(rows[0]["chunks_per_s"])
            for row in rows:
                print(
                    f"| {row['embedder']} | {row['name']} | {row['load_s']:.1f} | "
                    f"{row['chunks']} | {row['seconds']:.1f} | {row['chunks_per_s']:.0f} | "
                    f"{float(row['chunks_per_s']) / base:.2f}x | {row['cpu_s']:.1f} | "
                    f"{row['chunks_per_cpu_s']:.0f} |",
                    flush=True,
                )
        if not args.skip_lru:
            lru = bench_lru(tmp)
            n = int(lru["tenants"])
            print(
                f"\nlazy loading / LRU: {n} tenants of {lru['chunks_per_tenant']:.0f} chunks "
                f"(real on-disk indexes), each touched twice in turn, one search each"
            )
            print(
                f"- max_loaded=2: cold open + first query p50 {lru['cold_ms_2']:.1f} ms "
                f"(p99 {lru['cold_p99_ms_2']:.1f}), {lru['held_2']:.0f} held at the end, "
                f"peak RSS growth {lru['rss_growth_mb_2']:.0f} MB"
            )
            print(
                f"- max_loaded={n}: cold open + first query p50 {lru[f'cold_ms_{n}']:.1f} ms, "
                f"cached get + query p50 {lru['warm_ms']:.2f} ms, {lru[f'held_{n}']:.0f} held, "
                f"peak RSS growth {lru[f'rss_growth_mb_{n}']:.0f} MB",
                flush=True,
            )


if __name__ == "__main__":
    main()
