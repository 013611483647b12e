"""A real ingest process killed mid-transaction leaves the previous version intact on
Postgres, and the tenant's writer lock is free again at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from groundproxy.proxy.storage.backends import PostgresStorage, ingest_texts
from groundproxy.retrieval.embedder import load_embedder
from groundproxy.retrieval.pg_schema import TENANT_LOCK_CLASS
from groundproxy.testing.embedders import HASHING

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow


def _writer_holds_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s::oid",
            (TENANT_LOCK_CLASS,),
        ).fetchone()
    return bool(row and row[0])


def test_killed_ingest_leaves_previous_version(pg_dsn: str, tmp_path: Path) -> None:
    emb = load_embedder(HASHING)
    storage = PostgresStorage(pg_dsn)
    storage.start()
    ingest_texts(storage, "acme", [("keep.md", "The warranty lasts 12 months.")], emb)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3000):
        (docs / f"d{i:04d}.md").write_text(f"Document {i} says item {i} costs {i} euros. " * 20)
    env = {**os.environ, "GROUNDPROXY_DATABASE_URL": pg_dsn, "GROUNDPROXY_EMBEDDER": HASHING}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groundproxy.proxy",
            "ingest",
            "--tenant",
            "acme",
            "--data",
            str(tmp_path / "unused"),
            "--no-progress",
            str(docs),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not _writer_holds_lock(pg_dsn):
            assert proc.poll() is None, "the ingest ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1.0)  # well inside the transaction: documents and chunks written
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    index = storage.indexes(emb).refresh("acme")
    assert (index.version, index.count) == (1, 1)
    assert [d.doc_id for d in index.documents()] == ["keep.md"]
    with storage.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM gp_chunks WHERE tenant = 'acme'").fetchone()
    assert row is not None and row[0] == 1
    # the dead writer's lock went with its connection: the next ingest commits version 2
    deadline = time.monotonic() + 10
    while _writer_holds_lock(pg_dsn):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert ingest_texts(storage, "acme", [("new.md", "Returns within 30 days.")], emb).version == 2
    storage.close()
