"""The schema of a tenant's ``traces.sqlite`` (the embedded backend), in one place.

``nodes``: one row per guarded step of a trace (:mod:`proxy.storage.sqlite_traces`);
``answers``: what the verdict inspector shows beside a node — the model, the returned text,
latency, verifier and claim probabilities (:mod:`proxy.storage.answers`), written in the
node's transaction and pruned with it. The PostgreSQL backend's schema is
:mod:`groundproxy.retrieval.pg_schema`.
"""

from __future__ import annotations

import sqlite3

SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    step_id TEXT PRIMARY KEY,
    trace_id TEXT NOT NULL,
    parents TEXT NOT NULL,
    created REAL NOT NULL,
    request_id TEXT NOT NULL,
    policy TEXT NOT NULL,
    question_sha256 TEXT NOT NULL,
    context_sha256 TEXT NOT NULL,
    answer TEXT NOT NULL,
    trust REAL NOT NULL,
    action TEXT NOT NULL,
    claims TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_by_trace ON nodes (trace_id, created);
CREATE INDEX IF NOT EXISTS nodes_by_created ON nodes (created);
CREATE TABLE IF NOT EXISTS answers (
    step_id TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    returned TEXT NOT NULL,
    latency_ms REAL NOT NULL,
    verifier TEXT NOT NULL,
    probs TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_by_request ON nodes (request_id);
"""


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the tables and indexes that do not exist yet."""
    conn.executescript(SCHEMA)
