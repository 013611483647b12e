"""Sentence spans with exact character offsets (pysbd, English).

pysbd is asked for plain sentences (``char_span=False``) and the offsets are computed
here by walking the text: with ``clean=False`` pysbd returns the text verbatim, so the
segments concatenate back to the input. Its own ``char_span=True`` mode re-finds each
sentence with a regex over the whole text, which is quadratic and can anchor a repeated
sentence ("Yes. Yes.") to the wrong occurrence; walking forward from a cursor cannot.
"""

from __future__ import annotations

import functools
import re

import pysbd

_WS = " \t\r\n\f\v"
_ALNUM = re.compile(r"\w")


@functools.lru_cache(maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False, char_span=False)


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink [start, end) so that it neither starts nor ends with whitespace."""
    while start < end and text[start] in _WS:
        start += 1
    while end > start and text[end - 1] in _WS:
        end -= 1
    return start, end


def sentence_spans(
    text: str, start: int = 0, end: int | None = None, *, join_lines: bool = False
) -> list[tuple[int, int]]:
    """Sentences of ``text[start:end]`` as trimmed [start, end) offsets into ``text``.

    ``join_lines`` treats single newlines as spaces (a soft-wrapped paragraph), which
    pysbd otherwise takes as sentence ends; offsets are unaffected (same length).
    Spans with no letter or digit are dropped.
    """
    stop = len(text) if end is None else end
    piece = text[start:stop]
    if not piece.strip():
        return []
    if join_lines:
        piece = piece.replace("\n", " ")
    spans: list[tuple[int, int]] = []
    cursor = 0
    for sent in _segmenter().segment(piece):
        if not sent:
            continue
        at = piece.find(sent, cursor)
        if at < 0:  # pysbd altered the text (should not happen with clean=False)
            stripped = sent.strip()
            at = piece.find(stripped, cursor) if stripped else -1
            if at < 0:
                continue
            sent = stripped
        s, e = trim_span(text, start + at, start + at + len(sent))
        cursor = at + len(sent)
        if e > s and _ALNUM.search(text, s, e):
            spans.append((s, e))
    return spans
