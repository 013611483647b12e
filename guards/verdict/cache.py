"""Verdict cache: a verifier's Probs per (tenant, verifier, claim, question, evidence hash).

:class:`VerdictCache` is a bounded, thread-safe LRU map. Keys are a BLAKE2b digest of
(verifier id, claim text, question, sha-256 of the evidence text) under the tenant's
name: the tenant is part of every key, so a hit never crosses tenants, and an edited
document chunk (new text, new hash) is a new key. The question is part of the key
because verifiers may use it (the lexical verifier mixes cos(question, evidence) in).

:class:`CachingVerifier` wraps any :class:`~guards.types.Verifier` for one tenant:
cached pairs are answered from the cache, the rest are scored in one batch and stored.
Caveat: the ``lexical`` verifier fits its TF-IDF on the batch it is given, so a pair
scored in another batch may differ in the third decimal from a fresh score; verdicts
near the threshold can therefore depend on what was cached (model verifiers score each
pair independently and are unaffected).

``stats()`` gives hits, misses, hit rate, size and evictions (for logs and metrics).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from groundproxy.guards.types import Pair, Probs, Verifier, WrappedVerifier

DEFAULT_MAX_ENTRIES = 50_000


def _digest(*parts: str) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.digest()


def evidence_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class VerdictCache:
    """Bounded LRU of verifier outputs, tenant-scoped (see the module docstring)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self.max_entries = max_entries
        self._data: OrderedDict[tuple[str, bytes], Probs] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    @staticmethod
    def key(tenant: str, verifier: str, pair: Pair) -> tuple[str, bytes]:
        return tenant, _digest(
            verifier, pair.claim, pair.question or "", evidence_hash(pair.evidence)
        )

    def get_many(self, keys: Sequence[tuple[str, bytes]]) -> list[Probs | None]:
        with self._lock:
            out: list[Probs | None] = []
            for k in keys:
                p = self._data.get(k)
                if p is None:
                    self.misses += 1
                else:
                    self.hits += 1
                    self._data.move_to_end(k)
                out.append(p)
            return out

    def put_many(self, items: Sequence[tuple[tuple[str, bytes], Probs]]) -> None:
        if self.max_entries == 0:
            return
        with self._lock:
            for k, p in items:
                self._data[k] = p
                self._data.move_to_end(k)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)
                self.evictions += 1

    def clear_tenant(self, tenant: str) -> None:
        with self._lock:
            for k in [k for k in self._data if k[0] == tenant]:
                del self._data[k]

    def stats(self) -> dict[str, Any]:
        """hits, misses, hit_rate (0.0 before any lookup), size, max_entries, evictions."""
        with self._lock:
            looked = self.hits + self.misses
            return {
                "hits": self.hits,
                "misses": self.misses,
                "hit_rate": round(self.hits / looked, 4) if looked else 0.0,
                "size": len(self._data),
                "max_entries": self.max_entries,
                "evictions": self.evictions,
            }


class CachingVerifier(WrappedVerifier):
    """``inner`` behind ``cache`` for one tenant; same ``name`` and contradiction bar as
    ``inner`` (forwarded by :class:`~guards.types.WrappedVerifier`)."""

    def __init__(self, inner: Verifier, cache: VerdictCache, tenant: str) -> None:
        super().__init__(inner)
        self.cache = cache
        self.tenant = tenant
        self.hits = 0  # of this wrapper (one request)
        self.misses = 0

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        keys = [VerdictCache.key(self.tenant, self.name, p) for p in pairs]
        found = self.cache.get_many(keys)
        todo = [i for i, p in enumerate(found) if p is None]
        self.hits += len(pairs) - len(todo)
        self.misses += len(todo)
        if todo:
            scored = self.inner.score([pairs[i] for i in todo])
            if len(scored) != len(todo):
                return list(scored)  # let the caller's length check report it
            self.cache.put_many([(keys[i], p) for i, p in zip(todo, scored, strict=True)])
            for i, p in zip(todo, scored, strict=True):
                found[i] = p
        return [p for p in found if p is not None]
