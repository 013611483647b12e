"""Per-token output states of the embedder, kept from the pass that made the sentence vectors.

The guard embeds each claim (index search) and the verifier embeds the claim and its
evidence candidate sentences; while ``keep_token_states`` is on (the guard switches it on
when an adapter reading the token alignment comes into force), the ONNX embedder keeps the
unit-normalized last-layer token states of the short texts it embeds here (float16, bounded
by total tokens), so a token-level alignment of claim and evidence
(:mod:`groundproxy.models.token_alignment`) needs no second model call when the verifier
just embedded them. Index evidence sentences have theirs stored at ingest
(:mod:`groundproxy.retrieval.sentence_tokens`); any other text not here is embedded again by
:meth:`~groundproxy.retrieval.onnx_embedder.OnnxEmbedder.token_states`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

MAX_TOKENS = 32_768  # ~24 MiB of float16 states (384 per token)
MAX_TEXT_CHARS = 2000  # longer texts (ingest chunks, whole contexts) are not kept


class TokenStates(NamedTuple):
    """The word pieces of one text (no [CLS]/[SEP]) and their unit state vectors."""

    tokens: tuple[str, ...]
    states: npt.NDArray[np.float16]  # (len(tokens), dim)


class TokenStateLRU:
    """Thread-safe LRU of :class:`TokenStates` by exact text, bounded by total tokens."""

    def __init__(self, max_tokens: int = MAX_TOKENS) -> None:
        self.max_tokens = max_tokens
        self._items: OrderedDict[str, TokenStates] = OrderedDict()
        self._tokens = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> TokenStates | None:
        with self._lock:
            found = self._items.get(text)
            if found is None:
                self.misses += 1
                return None
            self._items.move_to_end(text)
            self.hits += 1
            return found

    def put(self, text: str, value: TokenStates) -> None:
        n = len(value.tokens)
        if len(text) > MAX_TEXT_CHARS or n > self.max_tokens:
            return
        with self._lock:
            old = self._items.pop(text, None)
            if old is not None:
                self._tokens -= len(old.tokens)
            self._items[text] = value
            self._tokens += n
            while self._tokens > self.max_tokens:
                _, dropped = self._items.popitem(last=False)
                self._tokens -= len(dropped.tokens)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._tokens = 0


def unit_states(hidden: npt.NDArray[np.float32], n: int) -> npt.NDArray[np.float16]:
    """Rows 1..n of one text's last-layer states (after [CLS], before [SEP]), unit length."""
    h = hidden[1 : n + 1]
    norms = np.linalg.norm(h, axis=1, keepdims=True)
    out: npt.NDArray[np.float16] = (h / np.clip(norms, 1e-12, None)).astype(np.float16)
    return out
