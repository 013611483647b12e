"""Micro-batching across concurrent requests: calls that arrive within a short window are
run as one batch by one worker thread, and each caller gets its own slice of the result.

Guards run in worker threads, one per request; each embeds a handful of claims and scores a
handful of pairs. Models are much cheaper per item in one batch of 32 than in 8 calls of 4,
so ``MicroBatcher`` queues the calls, and its worker thread waits up to ``window_s`` after
the first one (or until ``max_items`` are queued), runs them together and splits the result.

* ``window_s <= 0`` turns batching off: ``submit`` calls the function in the caller's thread.
* ``peers()``, when given, says how many callers could take part right now (the guard service
  passes its count of guards in flight); the worker stops waiting as soon as the batch holds
  that many calls, so a lone request never pays the window.
* A batch never exceeds ``max_items`` items, except a single call that is larger by itself.
* If a batch of several calls fails, each call is retried alone, so an error reaches exactly
  the callers whose input causes it (and a transient error reaches each caller it hit).
* The worker is a daemon thread started on first use; ``close()`` lets the batch in flight
  finish, fails the calls still queued, and never blocks longer than its timeout; nothing
  blocks interpreter exit.

``BatchingEmbedder`` and ``BatchingVerifier`` wrap the guard's backends with it; they keep
the wrapped backend's ``name`` (and ``dim``), so caches and index checks see no difference.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from groundproxy.errors import GuardError
from groundproxy.guards.types import Embedder, Pair, Probs, Verifier, WrappedVerifier

T = TypeVar("T")
R = TypeVar("R")


@dataclass(eq=False)
class _Call(Generic[T, R]):
    items: list[T]
    done: threading.Event = field(default_factory=threading.Event)
    result: R | None = None
    error: BaseException | None = None


@dataclass(frozen=True)
class BatchOptions:
    """``window_s`` (≤ 0: off), ``max_items`` per batch, ``observe(n)`` per batch run,
    ``peers()`` how many callers could take part now (see MicroBatcher)."""

    window_s: float = 0.002
    max_items: int = 64
    observe: Callable[[int], None] | None = None
    peers: Callable[[], int] | None = None

    def batcher(
        self, run: Callable[[list[T]], R], split: Callable[[R, int, int], R], name: str
    ) -> MicroBatcher[T, R]:
        """A MicroBatcher with these options."""
        return MicroBatcher(run, split, self, name)


class MicroBatcher(Generic[T, R]):
    """Runs ``run(items)`` for many concurrent ``submit`` calls at once.

    ``split(result, start, stop)`` cuts one caller's part out of the batch result (rows
    ``start:stop``); ``options.observe(n)`` is told the item count of every batch run.
    """

    def __init__(
        self,
        run: Callable[[list[T]], R],
        split: Callable[[R, int, int], R],
        options: BatchOptions | None = None,
        name: str = "batcher",
    ) -> None:
        options = options if options is not None else BatchOptions()
        if options.max_items < 1:
            raise ValueError("max_items must be ≥ 1")
        self._run = run
        self._split = split
        self.window_s = options.window_s
        self.max_items = options.max_items
        self._observe = options.observe
        self._peers = options.peers
        self._name = name
        self._queue: queue.SimpleQueue[_Call[T, R] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._closed = False

    def submit(self, items: Sequence[T]) -> R:
        """``run(items)``'s result, possibly computed in a batch with other callers' items."""
        call: _Call[T, R] = _Call(list(items))
        if self.window_s <= 0:
            return self._run_one(call.items)
        with self._lock:
            if self._closed:
                raise GuardError(f"{self._name} is closed")
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._loop, name=f"{self._name}-worker", daemon=True
                )
                self._worker.start()
            self._queue.put(call)
        call.done.wait()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the worker after the batch in flight; calls still queued, and any later
        ``submit``, fail with GuardError. Never waits more than ``timeout_s``."""
        with self._lock:
            self._closed = True
            worker = self._worker
            self._queue.put(None)
        if worker is not None:
            worker.join(timeout_s)
        self._fail_queued()
        self._queue.put(None)  # a worker still busy past the timeout stops when it returns

    def _run_one(self, items: list[T]) -> R:
        if self._observe is not None:
            self._observe(len(items))
        return self._run(items)

    def _loop(self) -> None:
        carry: _Call[T, R] | None = None
        while True:
            first = carry if carry is not None else self._queue.get()
            carry = None
            if first is None or self._closed:
                if first is not None:
                    self._finish(first, None, GuardError(f"{self._name} is closed"))
                self._fail_queued()
                return
            batch, count = [first], len(first.items)
            deadline = time.monotonic() + self.window_s
            stop = False
            while count < self.max_items:
                if self._peers is not None and len(batch) >= self._peers():
                    break  # nobody else could join: do not wait
                left = deadline - time.monotonic()
                try:
                    nxt = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                if count + len(nxt.items) > self.max_items:
                    carry = nxt  # starts the next batch
                    break
                batch.append(nxt)
                count += len(nxt.items)
            self._execute(batch)
            if stop or self._closed:
                if carry is not None:
                    self._finish(carry, None, GuardError(f"{self._name} is closed"))
                self._fail_queued()
                return

    def _execute(self, batch: list[_Call[T, R]]) -> None:
        items = [item for call in batch for item in call.items]
        try:
            result = self._run_one(items)
        except BaseException as exc:  # every caller must be woken, whatever happened
            if len(batch) == 1:
                self._finish(batch[0], None, exc)
                return
            for call in batch:  # find whose input fails: each call alone
                try:
                    self._finish(call, self._run_one(call.items), None)
                except BaseException as one:
                    self._finish(call, None, one)
            return
        start = 0
        for call in batch:
            stop = start + len(call.items)
            try:
                self._finish(call, self._split(result, start, stop), None)
            except BaseException as exc:
                self._finish(call, None, exc)
            start = stop

    @staticmethod
    def _finish(call: _Call[T, R], result: R | None, error: BaseException | None) -> None:
        call.result, call.error = result, error
        call.done.set()

    def _fail_queued(self) -> None:
        while True:
            try:
                call = self._queue.get_nowait()
            except queue.Empty:
                return
            if call is not None:
                self._finish(call, None, GuardError(f"{self._name} is closed"))


def _rows(a: npt.NDArray[np.float32], start: int, stop: int) -> npt.NDArray[np.float32]:
    return a[start:stop]


def _items(a: list[Probs], start: int, stop: int) -> list[Probs]:
    return a[start:stop]


class BatchingEmbedder:
    """An Embedder whose ``encode`` calls from concurrent threads are batched together."""

    def __init__(self, inner: Embedder, options: BatchOptions | None = None) -> None:
        opts = options or BatchOptions()
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.batcher: MicroBatcher[str, npt.NDArray[np.float32]] = opts.batcher(
            self._encode, _rows, f"embedder {inner.name}"
        )

    def _encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        out = self.inner.encode(texts)
        if out.shape != (len(texts), self.dim):
            raise GuardError(f"embedder {self.name} returned {out.shape} for {len(texts)} texts")
        return out

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.batcher.submit(texts)

    def close(self) -> None:
        self.batcher.close()


class BatchingVerifier(WrappedVerifier):
    """A Verifier whose ``score`` calls from concurrent threads are batched together; its
    ``name`` and contradiction bar are the inner verifier's (WrappedVerifier)."""

    def __init__(self, inner: Verifier, options: BatchOptions | None = None) -> None:
        super().__init__(inner)
        opts = options or BatchOptions()
        self.batcher: MicroBatcher[Pair, list[Probs]] = opts.batcher(
            self._score, _items, f"verifier {inner.name}"
        )

    def _score(self, pairs: list[Pair]) -> list[Probs]:
        out = list(self.inner.score(pairs))
        if len(out) != len(pairs):
            raise GuardError(f"verifier {self.name} returned {len(out)} for {len(pairs)} pairs")
        return out

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        if not pairs:
            return []
        return self.batcher.submit(pairs)

    def close(self) -> None:
        self.batcher.close()
