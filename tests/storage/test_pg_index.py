"""The Postgres + pgvector index backend against a real server: ingest, search, delete,
tenant isolation, atomic ingests, migrations, and replicas following commits."""

from __future__ import annotations

import time

import numpy as np
import psycopg
import pytest
from psycopg import sql

from groundproxy.errors import IndexStoreError
from groundproxy.proxy.storage.backends import PostgresStorage, delete_documents, ingest_texts
from groundproxy.retrieval.embedder import load_embedder
from groundproxy.retrieval.pg_index import PgIndexManager, _search_sql, vector_literal
from groundproxy.retrieval.pg_pool import PgPool
from groundproxy.retrieval.pg_schema import LATEST, migrate
from groundproxy.retrieval.pg_writer import PgIndexWriter
from groundproxy.testing.embedders import HASHING

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

WARRANTY = "The Acme X200 warranty lasts 24 months from the date of purchase."
RETURNS = "Unused items can be returned within 30 days for a full refund."


def test_ingest_search_and_lookups(storage: PostgresStorage) -> None:
    emb = load_embedder(HASHING)
    result = ingest_texts(
        storage, "acme", [("warranty.md", WARRANTY), ("returns.md", RETURNS)], emb
    )
    assert (result.added, result.version) == (2, 1)
    index = storage.indexes(emb).get("acme")
    assert (index.version, index.count) == (1, 2)
    hits = index.search(emb.encode(["How long does the X200 warranty last?"]), 2, 0.0)[0]
    assert hits[0].doc == "warranty.md" and hits[0].index_version == 1
    assert hits[0].text == WARRANTY[hits[0].span[0] : hits[0].span[1]]
    assert hits[0].score >= hits[-1].score
    doc = index.get_document("warranty.md")
    assert doc is not None and doc.text == WARRANTY and doc.chunks[0].chunk_id == "c0"
    assert index.get_chunk("warranty.md", "c0") == doc.chunks[0]
    assert [d.doc_id for d in index.documents()] == ["returns.md", "warranty.md"]
    # same text again: unchanged, no new version; a delete is version 2
    assert ingest_texts(storage, "acme", [("warranty.md", WARRANTY)], emb).unchanged == 1
    gone = delete_documents(storage, "acme", ["returns.md", "nope.md"])
    assert (gone.deleted, gone.missing, gone.version) == (["returns.md"], ["nope.md"], 2)
    index = storage.indexes(emb).get("acme")
    assert index.count == 1 and index.get_document("returns.md") is None


def test_tenants_never_read_each_other(storage: PostgresStorage) -> None:
    emb = load_embedder(HASHING)
    ingest_texts(storage, "alpha", [("secret.md", "Alpha's launch code is 4471.")], emb)
    ingest_texts(storage, "beta", [("public.md", "Beta sells garden tools.")], emb)
    beta = storage.indexes(emb).get("beta")
    hits = beta.search(emb.encode(["Alpha's launch code is 4471."]), 10, -1.0)[0]
    assert {h.doc for h in hits} == {"public.md"}
    assert beta.get_document("secret.md") is None
    assert beta.get_chunk("secret.md", "c0") is None
    assert [d.doc_id for d in beta.documents()] == ["public.md"]
    assert delete_documents(storage, "beta", ["secret.md"]).missing == ["secret.md"]
    assert storage.indexes(emb).get("alpha").get_document("secret.md") is not None


def test_uncommitted_ingest_is_invisible_and_rolls_back(storage: PostgresStorage) -> None:
    emb = load_embedder(HASHING)
    ingest_texts(storage, "acme", [("warranty.md", WARRANTY)], emb)
    manager = storage.indexes(emb)
    with PgIndexWriter(storage.pool, "acme", emb) as writer:
        writer.upsert("returns.md", RETURNS)
        writer.delete("warranty.md")
        writer._flush()  # rows written inside the open transaction
        index = manager.refresh("acme")
        assert index.version == 1 and index.get_document("warranty.md") is not None
        assert index.get_document("returns.md") is None
    # left without commit: rolled back
    index = manager.refresh("acme")
    assert (index.version, index.count) == (1, 1)
    assert [d.doc_id for d in index.documents()] == ["warranty.md"]


def test_embedder_mismatch_is_refused(storage: PostgresStorage) -> None:
    ingest_texts(storage, "acme", [("warranty.md", WARRANTY)], load_embedder(HASHING))

    class Other:
        dim = 8
        name = "other-8"

        def encode(self, texts: object) -> object:
            raise AssertionError("never called")

    with pytest.raises(IndexStoreError, match="built with"):
        PgIndexWriter(storage.pool, "acme", Other())  # type: ignore[arg-type]


def test_replica_sees_commit_within_one_poll_interval(
    storage: PostgresStorage, pg_dsn: str
) -> None:
    emb = load_embedder(HASHING)
    other = PgPool(pg_dsn)  # a second replica: its own pool and cache
    try:
        replica = PgIndexManager(other, emb, check_interval=0.3)
        assert replica.get("acme").count == 0
        ingest_texts(storage, "acme", [("warranty.md", WARRANTY)], emb)
        deadline = time.monotonic() + 0.3 + 0.2
        while replica.get("acme").count == 0:
            assert time.monotonic() < deadline, "commit not seen within one poll interval"
            time.sleep(0.02)
        hits = replica.get("acme").search(emb.encode(["warranty months"]), 1, 0.0)[0]
        assert hits and hits[0].doc == "warranty.md"
    finally:
        other.close()


def test_migrations_are_idempotent_and_versioned(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        first = migrate(conn)
        again = migrate(conn)
        versions = [r[0] for r in conn.execute("SELECT version FROM gp_schema_version")]
    assert first == list(range(1, LATEST + 1)) and again == [] and versions == first


def test_search_runs_through_the_hnsw_index(storage: PostgresStorage) -> None:
    """The search statement itself, run (EXPLAIN ANALYZE) on ingested rows, goes through the
    partial HNSW (cosine) index, and its nearest row is the right one."""
    emb = load_embedder(HASHING)
    ingest_texts(storage, "acme", [("warranty.md", WARRANTY), ("returns.md", RETURNS)], emb)
    query = emb.encode(["How long does the X200 warranty last?"])
    params = {"queries": [vector_literal(query[0])], "tenant": "acme", "k": 2}
    with storage.pool.connection() as conn:
        for knob in ("seqscan", "bitmapscan", "sort"):
            conn.execute(f"SET enable_{knob} = off")  # two rows: force the index choice
        statement = _search_sql(emb.dim)
        plan = "\n".join(
            str(r[0]) for r in conn.execute(sql.SQL("EXPLAIN ANALYZE ") + statement, params)
        )
        rows = conn.execute(statement, params).fetchall()
        for knob in ("seqscan", "bitmapscan", "sort"):
            conn.execute(f"RESET enable_{knob}")
        (definition,) = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (f"gp_chunks_hnsw_{emb.dim}",)
        ).fetchone()
    assert f"Index Scan using gp_chunks_hnsw_{emb.dim}" in plan and "never executed" not in plan
    assert [r[2] for r in rows] == ["warranty.md", "returns.md"]
    # built with the configured effort (GROUNDPROXY_HNSW_*; pgvector's defaults here)
    assert "m='16'" in definition and "ef_construction='64'" in definition


def test_tiny_vector_components_are_stored_and_searched(storage: PostgresStorage) -> None:
    """Subnormal float32 components (1e-45) would be "out of range" for PostgreSQL."""
    emb = load_embedder(HASHING)
    ingest_texts(storage, "acme", [("warranty.md", WARRANTY)], emb)
    query = emb.encode(["warranty months"]).copy()
    query[0, :8] = np.float32(1e-45)
    hits = storage.indexes(emb).get("acme").search(query, 1, -1.0)[0]
    assert [h.doc for h in hits] == ["warranty.md"]
