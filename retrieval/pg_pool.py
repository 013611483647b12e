"""A small thread-safe pool of PostgreSQL connections (psycopg 3), one per replica.

Every connection is in autocommit mode (a reader's statement sees one committed snapshot);
writers open an explicit transaction (``with conn.transaction()``). The first connection a
pool makes runs the schema migrations (``retrieval.pg_schema``). A connection that broke
(server restart, network) is dropped instead of being returned to the pool.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from groundproxy.errors import IndexStoreError
from groundproxy.retrieval.pg_schema import migrate

_SESSION = (
    # pgvector 0.8: keep scanning the HNSW graph until the tenant filter found k rows.
    "SET hnsw.iterative_scan = strict_order",
    "SET hnsw.ef_search = 100",
)


class PgPool:
    """At most ``size`` open connections to ``dsn``; ``connection()`` lends one."""

    def __init__(self, dsn: str, size: int = 8, *, connect_timeout: float = 10.0) -> None:
        self.dsn = dsn
        self._size = max(1, size)
        self._timeout = connect_timeout
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(self._size)
        self._migrated = False
        self._migrate_lock = threading.Lock()
        self._closed = False

    def _connect(self) -> Any:
        import psycopg

        try:
            conn = psycopg.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=int(self._timeout),
                application_name="groundproxy",
            )
        except psycopg.Error as exc:
            raise IndexStoreError(f"cannot connect to PostgreSQL: {_short(exc)}") from exc
        with self._migrate_lock:
            if not self._migrated:
                migrate(conn)
                self._migrated = True
        for statement in _SESSION:
            conn.execute(statement)
        return conn

    def migrate(self) -> None:
        """Connect once now (runs the migrations): start-up fails fast on a bad URL."""
        with self.connection():
            pass

    @contextmanager
    def connection(self) -> Iterator[Any]:
        if self._closed:
            raise IndexStoreError("the PostgreSQL pool is closed")
        if not self._slots.acquire(timeout=60.0):
            raise IndexStoreError("no PostgreSQL connection free after 60 s")
        conn: Any = None
        try:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = self._connect()
            yield conn
        except BaseException:
            if conn is not None and not conn.closed and conn.info.transaction_status != 0:
                conn.close()  # unknown state after a failure inside a transaction
            raise
        finally:
            if conn is not None:
                if conn.closed or conn.broken or self._closed or conn.info.transaction_status != 0:
                    conn.close()
                else:
                    self._idle.put(conn)
            self._slots.release()

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


def _short(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
