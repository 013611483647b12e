"""A small in-process LRU of sentence vectors, by exact text (thread-safe).

The guard embeds each claim for the index search and the verifier embeds it again (and a
request's context sentences likewise); the ONNX embedder keeps the vectors it made here, so
the second call costs a dict look-up instead of a tokenization and a model run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
DEFAULT_SIZE = 4096
MAX_TEXT_CHARS = 2000  # longer texts (ingest chunks) are not kept


class VectorLRU:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def encode(
        self, texts: Sequence[str], dim: int, embed: Callable[[list[str]], Vectors]
    ) -> Vectors:
        """Vectors of ``texts``: cached ones from here, the rest from ONE ``embed`` call."""
        out = np.empty((len(texts), dim), dtype=np.float32)
        missing: list[int] = []
        with self._lock:
            for i, t in enumerate(texts):
                v = self._items.get(t)
                if v is None:
                    missing.append(i)
                else:
                    self._items.move_to_end(t)
                    out[i] = v
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
        if not missing:
            return out
        todo = list(dict.fromkeys(texts[i] for i in missing))
        made = embed(todo)
        row = {t: made[k] for k, t in enumerate(todo)}
        for i in missing:
            out[i] = row[texts[i]]
        if self.size > 0:
            with self._lock:
                for t, v in row.items():
                    if len(t) <= MAX_TEXT_CHARS:
                        self._items[t] = v.copy()
                        self._items.move_to_end(t)
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        return out
