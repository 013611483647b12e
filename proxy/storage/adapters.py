"""A tenant's adapter files (:mod:`groundproxy.guards.adapter.combiner`) and the cache that serves
them.

``groundproxy calibrate --fit`` writes ``<data>/<tenant>/adapter-v<N>.json`` (N = 1, 2, …;
every version is kept) and then ``<data>/<tenant>/adapter.json``, the version in force
(the same content; both written atomically). The guard reads ``adapter.json`` through
:class:`AdapterCache`, which re-reads it when its mtime changes: a new fit is served by the
next request, without a restart. No file → no adapter (the zero-shot decision). An
unreadable file, or one fitted for another verifier than the policy's, is a
:class:`PolicyError` (the policy's ``on_guard_error`` applies), never a silent fall-back.

A tenant without an adapter whose policy says ``verifier.decision: learned`` is served the
verifier's shipped answer combiner (:func:`shipped_decision`, fitted on
``../shared/data/train`` by ``training/answer_combiner.py``); a verifier that ships none
is a :class:`PolicyError` too.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from pathlib import Path
from typing import Any

from groundproxy.errors import PolicyError
from groundproxy.guards import Adapter, ZeroShotRecord, read_adapter, read_record
from groundproxy.retrieval.fsutil import write_json_atomic
from groundproxy.retrieval.names import validate_tenant

CURRENT = "adapter.json"
MODELS_DIR = Path(__file__).resolve().parents[2] / "models"
# The verifiers that ship a learned answer-level decision, and where (under models/).
SHIPPED: dict[str, str] = {
    "embedhead": "embedhead/answer-combiner.json",
    "crossencoder": "crossencoder/answer-combiner.json",
}
_VERSIONED = re.compile(r"^adapter-v(\d+)\.json$")


def tenant_dir(data_dir: Path, tenant: str) -> Path:
    return Path(data_dir) / validate_tenant(tenant)


def versions(data_dir: Path, tenant: str) -> list[int]:
    folder = tenant_dir(data_dir, tenant)
    if not folder.is_dir():
        return []
    found = (_VERSIONED.match(p.name) for p in folder.iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def _write_atomic(path: Path, content: dict[str, Any]) -> None:
    write_json_atomic(path, content, prefix=".adapter-")


def write_adapter(data_dir: Path, tenant: str, content: dict[str, Any]) -> Path:
    """Write the next version and make it the one in force; returns the versioned path.
    ``content["version"]`` is set here."""
    version = max(versions(data_dir, tenant), default=0) + 1
    content = {**content, "version": version}
    read_adapter(content)  # never write a file the guard would refuse
    folder = tenant_dir(data_dir, tenant)
    path = folder / f"adapter-v{version}.json"
    _write_atomic(path, content)
    _write_atomic(folder / CURRENT, content)
    return path


Record = Adapter | ZeroShotRecord | None


class AdapterCache:
    """Thread-safe reader of the tenants' ``adapter.json``, re-read when it changes."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self._cache: dict[str, tuple[int, Record]] = {}
        self._lock = threading.Lock()

    def record(self, tenant: str) -> Record:
        """The tenant's record in force: an adapter, a zero-shot record, or None (never fitted)."""
        path = tenant_dir(self.data_dir, tenant) / CURRENT
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        with self._lock:
            hit = self._cache.get(tenant)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        try:
            found = read_record(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
            raise PolicyError(f"cannot read the adapter of tenant '{tenant}': {exc}") from exc
        with self._lock:
            self._cache[tenant] = (stamp, found)
        return found

    def get(self, tenant: str) -> Adapter | None:
        """The tenant's adapter in force (None: the zero-shot decision)."""
        found = self.record(tenant)
        return found if isinstance(found, Adapter) else None

    def for_verifier(self, tenant: str, verifier: str) -> Adapter | None:
        """The tenant's adapter, checked against the verifier the policy uses now."""
        adapter = self.get(tenant)
        if adapter is not None and adapter.verifier != verifier:
            raise PolicyError(
                f"the adapter of tenant '{tenant}' was fitted on verifier '{adapter.verifier}'"
                f", the policy uses '{verifier}': run 'groundproxy calibrate --fit' again"
            )
        return adapter

    def zero_shot_for(self, tenant: str, verifier: str) -> ZeroShotRecord | None:
        """The tenant's zero-shot record in force when it was fitted on ``verifier`` (what
        it proves about the zero-shot decision holds for that verifier only)."""
        found = self.record(tenant)
        return found if isinstance(found, ZeroShotRecord) and found.verifier == verifier else None


@functools.cache
def shipped_decision(verifier: str) -> Adapter:
    """The learned answer-level decision shipped with ``verifier`` (read once)."""
    where = SHIPPED.get(verifier)
    if where is None:
        raise PolicyError(
            f"verifier.decision 'learned': verifier '{verifier}' ships no answer combiner "
            f"(those that do: {', '.join(sorted(SHIPPED))}); use 'every_claim' or fit the "
            "tenant's own adapter with 'groundproxy calibrate --fit'"
        )
    path = MODELS_DIR / where
    try:
        adapter = Adapter.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        raise PolicyError(f"cannot read the answer combiner of '{verifier}': {exc}") from exc
    if adapter.verifier != verifier or adapter.source != "shipped":
        raise PolicyError(f"{path}: not the shipped answer combiner of '{verifier}'")
    return adapter
