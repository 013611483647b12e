"""The ingest's progress bar (stderr): chunks embedded, against a total counted first.

The files are listed before any is read (:func:`retrieval.readers.list_sources`), so the
total is known from the start: each file not read yet counts as its size's estimate of
chunks, each file read as its real chunk count (the one being read as the larger of the
two, so the total does not grow while a file's estimate is right). The writer embeds a
batch at a time and the bar moves with every batch; ``files=k/N`` says how far the reading
is.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import TracebackType
from typing import Self

CHARS_PER_CHUNK = 450  # a file's first guess (bytes per chunk), until it is read


def estimate_chunks(size: int) -> int:
    """Chunks a source of ``size`` bytes (or characters) is expected to give."""
    return max(1, size // CHARS_PER_CHUNK)


class IngestBar:
    """``tqdm`` over chunks embedded; ``estimates`` holds each source's guess, in order."""

    def __init__(self, tenant: str, estimates: Sequence[int], enabled: bool) -> None:
        from tqdm import tqdm

        self._estimates = list(estimates)
        self._known = 0  # real chunk counts of the sources read whole
        self._current = 0  # chunks of the source being read, so far
        self._done = 0  # sources read whole
        self._bar = tqdm(
            total=self._total(),
            desc=f"ingest {tenant}",
            unit="chunk",
            file=sys.stderr,
            disable=not enabled,
        )
        self._postfix()

    def _total(self) -> int:
        """Read sources as they are, the one being read as the larger of its estimate and
        what it gave so far, the rest as their estimates."""
        current = self._estimates[self._done] if self._done < len(self._estimates) else 0
        rest = sum(self._estimates[self._done + 1 :])
        return self._known + max(current, self._current) + rest

    def embedded(self, chunks: int) -> None:
        self._bar.update(chunks)

    def document(self, chunks: int) -> None:
        """A document of the source being read was chunked into ``chunks``."""
        self._current += chunks
        self._retotal()

    def source_done(self) -> None:
        """The source being read has been read whole."""
        self._known += self._current
        self._current = 0
        self._done += 1
        self._retotal()
        self._postfix()

    def _retotal(self) -> None:
        total = self._total()
        if total != self._bar.total:
            self._bar.total = total
            self._bar.refresh()

    def _postfix(self) -> None:
        self._bar.set_postfix_str(f"files={self._done}/{len(self._estimates)}", refresh=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is not None:
            self._bar.leave = False  # cleared: the error that follows gets a line of its own
        self._bar.close()
