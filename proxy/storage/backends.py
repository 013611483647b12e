"""Where a replica keeps what replicas may share: tenant indexes, traces, calibration,
reviewers' labels and tenants' adapters.

One setting chooses: without ``GROUNDPROXY_DATABASE_URL`` the embedded backend (hnswlib +
SQLite under ``--data``, one server; the default, unchanged), with it PostgreSQL + pgvector
(several ``groundproxy serve`` replicas behind a load balancer see the same documents,
traces, calibration, labels and adapters). Policy files stay files, shared by path. The
verdict cache is never shared: it stays in each replica's memory
(``GuardService.verdict_cache``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from groundproxy.guards.types import Embedder
from groundproxy.proxy.storage.adapters import AdapterCache, write_adapter
from groundproxy.proxy.storage.calibration import CalibrationCache, write_calibration
from groundproxy.proxy.storage.feedback import Labelled, append, feedback_path, read_labelled
from groundproxy.proxy.storage.sqlite_traces import TraceStores
from groundproxy.retrieval.ingest import (
    WriterOpener,
    delete_docs,
    ingest_paths_with,
    ingest_texts_with,
    with_writer_of,
    writer_opener,
)
from groundproxy.retrieval.storage import TenantIndexes


class IndexStorage(Protocol):
    """The tenants' document indexes: read (the server's cache) and written (ingest)."""

    def indexes(self, embedder: Embedder | None) -> TenantIndexes: ...

    def open_writer(self) -> WriterOpener: ...


class TraceStorage(Protocol):
    """The tenants' multi-step traces (and the answers the inspector lists)."""

    def traces(self) -> TraceStores: ...


class CalibrationStorage(Protocol):
    """The tenants' calibrated thresholds (``groundproxy calibrate``)."""

    def calibrations(self) -> CalibrationCache: ...

    def write_calibration(self, tenant: str, content: dict[str, Any]) -> str:
        """Store the tenant's calibration: where it went."""
        ...


class LabelStorage(Protocol):
    """Reviewers' labels (``POST /v1/groundproxy/feedback``), what adapters are fitted on."""

    def append_feedback(self, tenant: str, item: Labelled) -> tuple[Labelled, int]:
        """Store one label: (the stored record, the tenant's count)."""
        ...

    def read_feedback(self, tenant: str) -> list[Labelled]: ...

    def feedback_bytes(self, tenant: str) -> int:
        """The size of the tenant's label store (what ``judge.max_label_store_bytes``
        bounds)."""
        ...


class AdapterStorage(Protocol):
    """The tenants' fitted adapters (:mod:`groundproxy.guards.adapter.combiner`), every version."""

    def adapters(self) -> AdapterCache: ...

    def write_adapter(self, tenant: str, content: dict[str, Any]) -> tuple[int, str]:
        """Store the tenant's next adapter version, in force from now on: (version, where)."""
        ...


class GuardStorage(IndexStorage, CalibrationStorage, AdapterStorage, Protocol):
    """What a guard reads (:func:`proxy.serving.guarding.build_guard`)."""


class Storage(GuardStorage, TraceStorage, LabelStorage, Protocol):
    """A whole backend: everything the server reads or writes outside policy files."""

    name: str

    def start(self) -> None:
        """At server start-up: connect and migrate the schema (fails fast on a bad URL)."""
        ...

    def close(self) -> None: ...


class EmbeddedStorage:
    """hnswlib + SQLite generations, traces and calibration files under ``data_dir``."""

    name = "embedded"

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)

    def indexes(self, embedder: Embedder | None) -> TenantIndexes:
        from groundproxy.retrieval.manager import IndexManager

        return IndexManager(self.data_dir, embedder)

    def open_writer(self) -> WriterOpener:
        return writer_opener(self.data_dir)

    def traces(self) -> TraceStores:
        return TraceStores(self.data_dir)

    def calibrations(self) -> CalibrationCache:
        return CalibrationCache(self.data_dir)

    def write_calibration(self, tenant: str, content: dict[str, Any]) -> str:
        return str(write_calibration(self.data_dir, tenant, content))

    def adapters(self) -> AdapterCache:
        return AdapterCache(self.data_dir)

    def write_adapter(self, tenant: str, content: dict[str, Any]) -> tuple[int, str]:
        path = write_adapter(self.data_dir, tenant, content)
        return int(path.stem.rsplit("v", 1)[1]), str(path)

    def append_feedback(self, tenant: str, item: Labelled) -> tuple[Labelled, int]:
        saved = append(self.data_dir, tenant, item)
        return saved, len(read_labelled(feedback_path(self.data_dir, tenant)))

    def read_feedback(self, tenant: str) -> list[Labelled]:
        return read_labelled(feedback_path(self.data_dir, tenant))

    def feedback_bytes(self, tenant: str) -> int:
        try:
            return feedback_path(self.data_dir, tenant).stat().st_size
        except FileNotFoundError:
            return 0

    def start(self) -> None:
        """Nothing to prepare: folders are made on first write."""

    def close(self) -> None:
        """Nothing held open here (indexes and trace stores close themselves)."""


class PostgresStorage:
    """PostgreSQL + pgvector at ``dsn`` (schema migrated on the first connection)."""

    name = "postgres"

    def __init__(self, dsn: str, pool_size: int = 8) -> None:
        from groundproxy.retrieval.pg_pool import PgPool

        self.pool = PgPool(dsn, pool_size)

    def indexes(self, embedder: Embedder | None) -> TenantIndexes:
        from groundproxy.retrieval.pg_index import PgIndexManager

        return PgIndexManager(self.pool, embedder)

    def open_writer(self) -> WriterOpener:
        from groundproxy.retrieval.pg_writer import PgIndexWriter

        return functools.partial(PgIndexWriter, self.pool)

    def traces(self) -> TraceStores:
        from groundproxy.proxy.storage.pg_traces import PgTraceStores

        return PgTraceStores(self.pool)

    def calibrations(self) -> CalibrationCache:
        from groundproxy.proxy.storage.pg_traces import PgCalibrationCache

        return PgCalibrationCache(self.pool)

    def write_calibration(self, tenant: str, content: dict[str, Any]) -> str:
        from groundproxy.proxy.storage.pg_traces import write_pg_calibration

        return write_pg_calibration(self.pool, tenant, content)

    def adapters(self) -> AdapterCache:
        from groundproxy.proxy.storage.pg_adapt import PgAdapterCache

        return PgAdapterCache(self.pool)

    def write_adapter(self, tenant: str, content: dict[str, Any]) -> tuple[int, str]:
        from groundproxy.proxy.storage.pg_adapt import write_pg_adapter

        return write_pg_adapter(self.pool, tenant, content)

    def append_feedback(self, tenant: str, item: Labelled) -> tuple[Labelled, int]:
        from groundproxy.proxy.storage.pg_adapt import append_pg_feedback

        return append_pg_feedback(self.pool, tenant, item)

    def read_feedback(self, tenant: str) -> list[Labelled]:
        from groundproxy.proxy.storage.pg_adapt import read_pg_feedback

        return read_pg_feedback(self.pool, tenant)

    def feedback_bytes(self, tenant: str) -> int:
        from groundproxy.proxy.storage.pg_adapt import pg_feedback_bytes

        return pg_feedback_bytes(self.pool, tenant)

    def start(self) -> None:
        self.pool.migrate()

    def close(self) -> None:
        self.pool.close()


def open_storage(data_dir: Path, database_url: str | None) -> Storage:
    """The backend one setting selects: Postgres when ``database_url`` is set."""
    if database_url:
        return PostgresStorage(database_url)
    return EmbeddedStorage(data_dir)


@contextmanager
def started_storage(data_dir: Path, database_url: str | None) -> Iterator[Storage]:
    """The selected backend, started (Postgres: connected, schema migrated) and closed after:
    what a command that reads or writes the shared store (``check``, ``calibrate``) opens."""
    storage = open_storage(data_dir, database_url)
    storage.start()
    try:
        yield storage
    finally:
        storage.close()


def _opener(storage: IndexStorage) -> WriterOpener:
    return storage.open_writer()


# the ingest entry points on a storage backend (``storage`` first), each one atomic commit
ingest_texts = with_writer_of(_opener, ingest_texts_with)
ingest_paths = with_writer_of(_opener, ingest_paths_with)
delete_documents = with_writer_of(_opener, delete_docs)
