"""A fake :class:`~groundproxy.proxy.storage.backends.Storage`: labels, adapters and
calibrations in memory, inspectable by a test.

    storage = MemoryStorage()
    storage.write_calibration("acme", {"threshold": 0.7, "verifier": "lexical"})
    guard = build_guard(settings, storage=storage)   # calibrated policies read 0.7
    ...
    assert storage.labels["acme"][0].label_hallucinated == 1

It is one fake per narrow protocol, composed: :class:`MemoryLabels` (``LabelStorage``),
:class:`MemoryAdapters` (``AdapterStorage``) and :class:`MemoryCalibrations`
(``CalibrationStorage``) keep their data in dicts and behave as the real backends do (an
adapter the guard would refuse is refused when written; versions count up; a missing
calibration is the same :class:`PolicyError`). The tenant indexes and traces
(``IndexStorage``, ``TraceStorage``) are the embedded backend's own, in a folder of the
caller's (default: a new temporary one): they are files by nature, and fast.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from groundproxy.errors import PolicyError
from groundproxy.guards import Adapter
from groundproxy.guards.types import Embedder
from groundproxy.proxy.storage.adapters import AdapterCache
from groundproxy.proxy.storage.backends import EmbeddedStorage
from groundproxy.proxy.storage.calibration import CalibrationCache
from groundproxy.proxy.storage.feedback import Labelled, stamped
from groundproxy.proxy.storage.sqlite_traces import TraceStores
from groundproxy.retrieval.ingest import WriterOpener
from groundproxy.retrieval.names import validate_tenant
from groundproxy.retrieval.storage import TenantIndexes


class MemoryLabels:
    """Reviewers' labels per tenant, oldest first (``LabelStorage``)."""

    def __init__(self) -> None:
        self.labels: dict[str, list[Labelled]] = {}

    def append_feedback(self, tenant: str, item: Labelled) -> tuple[Labelled, int]:
        stored = stamped(item)
        kept = self.labels.setdefault(validate_tenant(tenant), [])
        kept.append(stored)
        return stored, len(kept)

    def read_feedback(self, tenant: str) -> list[Labelled]:
        return list(self.labels.get(validate_tenant(tenant), []))

    def feedback_bytes(self, tenant: str) -> int:
        """The labels' size as JSON lines (what the embedded backend's file would hold)."""
        rows = self.labels.get(validate_tenant(tenant), [])
        return sum(len(json.dumps(asdict(r), ensure_ascii=False).encode()) + 1 for r in rows)


class _AdapterReader(AdapterCache):
    """The guard's view of :class:`MemoryAdapters` (no files: ``get`` reads the dict)."""

    def __init__(self, versions: dict[str, list[dict[str, Any]]]) -> None:  # no super()
        self._versions = versions

    def get(self, tenant: str) -> Adapter | None:
        kept = self._versions.get(validate_tenant(tenant))
        return Adapter.from_dict(kept[-1]) if kept else None


class MemoryAdapters:
    """Every adapter version per tenant, the last in force (``AdapterStorage``)."""

    def __init__(self) -> None:
        self.adapter_versions: dict[str, list[dict[str, Any]]] = {}

    def adapters(self) -> AdapterCache:
        return _AdapterReader(self.adapter_versions)

    def write_adapter(self, tenant: str, content: dict[str, Any]) -> tuple[int, str]:
        kept = self.adapter_versions.setdefault(validate_tenant(tenant), [])
        content = {**content, "version": len(kept) + 1}
        Adapter.from_dict(content)  # never store what the guard would refuse
        kept.append(content)
        return len(kept), f"memory:{tenant}/adapter-v{len(kept)}"


class _CalibrationReader(CalibrationCache):
    """The guard's view of :class:`MemoryCalibrations`."""

    def __init__(self, written: dict[str, dict[str, Any]]) -> None:  # no super()
        self._written = written

    def get(self, tenant: str) -> dict[str, Any]:
        found = self._written.get(validate_tenant(tenant))
        if found is None:
            raise PolicyError(
                f"verifier.threshold is 'calibrated' but tenant '{tenant}' has no calibration"
            )
        return found


class MemoryCalibrations:
    """The calibration written last per tenant (``CalibrationStorage``)."""

    def __init__(self) -> None:
        self.calibration: dict[str, dict[str, Any]] = {}

    def calibrations(self) -> CalibrationCache:
        return _CalibrationReader(self.calibration)

    def write_calibration(self, tenant: str, content: dict[str, Any]) -> str:
        self.calibration[validate_tenant(tenant)] = dict(content)
        return f"memory:{tenant}/calibration"


class MemoryStorage(MemoryLabels, MemoryAdapters, MemoryCalibrations):
    """The whole :class:`Storage` (module docstring); ``data_dir`` holds indexes and traces."""

    name = "memory"

    def __init__(self, data_dir: Path | None = None) -> None:
        MemoryLabels.__init__(self)
        MemoryAdapters.__init__(self)
        MemoryCalibrations.__init__(self)
        folder = data_dir if data_dir is not None else Path(tempfile.mkdtemp(prefix="gp-fake-"))
        self.files = EmbeddedStorage(folder)
        self.started = self.closed = False

    def indexes(self, embedder: Embedder | None) -> TenantIndexes:
        return self.files.indexes(embedder)

    def open_writer(self) -> WriterOpener:
        return self.files.open_writer()

    def traces(self) -> TraceStores:
        return self.files.traces()

    def start(self) -> None:
        self.started = True

    def close(self) -> None:
        self.closed = True
