"""On-disk layout of a tenant index: generations, the CURRENT pointer, meta, GC, lock.

::

    <data_dir>/<tenant>/CURRENT            {"generation": "gen-000007", "version": 7}
    <data_dir>/<tenant>/gen-000007/        index.bin, chunks.sqlite, meta.json
    <data_dir>/<tenant>/.tmp-<uuid>/       a writer's private copy (garbage if it crashed)
    <data_dir>/<tenant>/.lock              flock held by the one writer at a time

A generation is never modified once CURRENT may name it; CURRENT is replaced atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from groundproxy.errors import IndexStoreError
from groundproxy.retrieval.fsutil import sha256_file, write_durable

CURRENT = "CURRENT"
CURRENT_TMP = "CURRENT.tmp"
INDEX_FILE = "index.bin"
CHUNKS_FILE = "chunks.sqlite"
META_FILE = "meta.json"
LOCK_FILE = ".lock"
TMP_PREFIX = ".tmp-"
FORMAT = 1
_GEN_RE = re.compile(r"gen-(\d{6,})")


@dataclass(frozen=True)
class Pointer:
    """What CURRENT says: the live generation directory and its version."""

    generation: str
    version: int


@dataclass(frozen=True)
class Meta:
    """meta.json of a generation."""

    version: int
    dim: int
    embedder: str
    count: int
    documents: int
    next_label: int
    deleted: int
    index_sha256: str
    chunks_sha256: str
    created_at: float
    format: int = FORMAT


def gen_name(version: int) -> str:
    return f"gen-{version:06d}"


def gen_version(name: str) -> int | None:
    m = _GEN_RE.fullmatch(name)
    return int(m.group(1)) if m else None


def current_signature(tenant_dir: Path) -> bytes | None:
    """CURRENT's raw content (a few bytes), or None when there is none: the change check.

    Content, not stat data: a recycled inode with an equal mtime tick would hide a change.
    """
    try:
        return (tenant_dir / CURRENT).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IndexStoreError(f"cannot read {tenant_dir / CURRENT}: {exc}") from exc


def read_current(tenant_dir: Path, tenant: str) -> Pointer | None:
    """The live generation of ``tenant``, or None when it has no index yet."""
    path = tenant_dir / CURRENT
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IndexStoreError(f"tenant {tenant!r}: cannot read {path}: {exc}") from exc
    try:
        data = json.loads(raw)
        pointer = Pointer(str(data["generation"]), int(data["version"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexStoreError(f"tenant {tenant!r}: {path} is corrupt: {exc}") from exc
    if gen_version(pointer.generation) != pointer.version:
        raise IndexStoreError(f"tenant {tenant!r}: {path} names an invalid generation")
    return pointer


def pointer_bytes(pointer: Pointer) -> bytes:
    """CURRENT's content for ``pointer``."""
    return json.dumps(asdict(pointer)).encode("utf-8")


def read_meta(gen_dir: Path, tenant: str) -> Meta:
    path = gen_dir / META_FILE
    try:
        data: Any = json.loads(path.read_bytes())
        meta = Meta(**data)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, TypeError) as exc:
        raise IndexStoreError(f"tenant {tenant!r}: {path} is unreadable or corrupt: {exc}") from exc
    if meta.format != FORMAT:
        raise IndexStoreError(f"tenant {tenant!r}: {path} has unknown format {meta.format}")
    return meta


def write_meta(gen_dir: Path, meta: Meta) -> None:
    write_durable(gen_dir / META_FILE, json.dumps(asdict(meta), indent=1).encode("utf-8"))


def verify_generation(gen_dir: Path, meta: Meta, tenant: str) -> None:
    """Check both data files against the checksums in meta.json."""
    for name, expected in ((INDEX_FILE, meta.index_sha256), (CHUNKS_FILE, meta.chunks_sha256)):
        path = gen_dir / name
        try:
            actual = sha256_file(path)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise IndexStoreError(f"tenant {tenant!r}: cannot read {path}: {exc}") from exc
        if actual != expected:
            raise IndexStoreError(
                f"tenant {tenant!r}: {path} is corrupt (sha256 {actual[:12]}…, "
                f"meta.json expects {expected[:12]}…)"
            )


def collect_garbage(tenant_dir: Path, live: Pointer) -> None:
    """Remove temp dirs and generations other than the live one and its predecessor.

    Only call this while holding the tenant's writer lock.
    """
    older = sorted(
        v
        for p in tenant_dir.iterdir()
        if (v := gen_version(p.name)) is not None and v < live.version
    )
    keep = {live.generation} | ({gen_name(older[-1])} if older else set())
    for path in tenant_dir.iterdir():
        stale_gen = gen_version(path.name) is not None and path.name not in keep
        if (stale_gen or path.name.startswith(TMP_PREFIX)) and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (tenant_dir / CURRENT_TMP).unlink()


class WriterLock:
    """Exclusive flock on ``<tenant>/.lock``; released on close or when the process dies."""

    def __init__(self, tenant_dir: Path, tenant: str, timeout: float) -> None:
        self._fd: int | None = os.open(tenant_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self.release()
                    raise IndexStoreError(
                        f"tenant {tenant!r}: another writer holds {tenant_dir / LOCK_FILE} "
                        f"(waited {timeout:.0f} s)"
                    ) from None
                time.sleep(0.05)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
