"""A disk cache of sentence embeddings (under /tmp, never in the repository).

Keys are sha1 of the text; vectors are appended in shards so an interrupted run resumes.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundproxy.guards.types import Embedder
from groundproxy.models.features import EMB_DIM


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class CachedEncoder:
    def __init__(self, embedder: Embedder, directory: Path, chunk: int = 1024) -> None:
        self.embedder = embedder
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.chunk = chunk
        self.index: dict[str, int] = {}
        parts: list[npt.NDArray[np.float32]] = []
        for shard in sorted(self.dir.glob("shard_*.npz")):
            with np.load(shard) as z:
                keys = [str(k) for k in z["keys"]]
                vecs = np.asarray(z["vectors"], dtype=np.float32)
            for k in keys:
                self.index[k] = len(self.index)
            parts.append(vecs)
        self._parts = parts or [np.zeros((0, EMB_DIM), dtype=np.float32)]
        self._n_shards = len(parts)

    def __call__(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        keys = [_key(t) for t in texts]
        missing: dict[str, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in self.index and k not in missing:
                missing[k] = t
        if missing:
            todo = sorted(missing.items(), key=lambda kv: len(kv[1]))
            started = time.perf_counter()
            done = 0
            for at in range(0, len(todo), self.chunk):
                part = todo[at : at + self.chunk]
                vecs = self.embedder.encode([t for _, t in part]).astype(np.float32)
                shard = self.dir / f"shard_{self._n_shards:05d}.npz"
                np.savez(shard, keys=np.array([k for k, _ in part]), vectors=vecs)
                self._n_shards += 1
                for k, _ in part:
                    self.index[k] = len(self.index)
                self._parts.append(vecs)
                done += len(part)
                rate = done / max(1e-9, time.perf_counter() - started)
                print(
                    f"  embedded {done}/{len(todo)} new texts ({rate:.0f}/s)",
                    file=sys.stderr,
                    flush=True,
                )
        if len(self._parts) > 1:
            self._parts = [np.concatenate(self._parts)]
        return self._parts[0][[self.index[k] for k in keys]]
