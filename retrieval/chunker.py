"""Sentence-aware chunking with exact character offsets.

``split_sentences`` cuts a text into sentences with pysbd; ``chunk_text`` packs whole
sentences into chunks of at most ``max_chars`` characters. Every returned span satisfies
``text[c.start:c.end] == c.text`` and carries no surrounding whitespace.

pysbd is quadratic in the length of its input, so the text is first cut into blocks
(paragraphs, then at most ``_BLOCK_CHARS`` characters at a line or sentence end) and only
pysbd's sentence strings are used: the offsets are recovered here, linearly.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_BLOCK_CHARS = 1000
LARGE_TEXT_CHARS = 262_144  # above this, sentences are cut by regex (see iter_sentences)
_PARAGRAPH_RE = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_SENTENCE_END_RE = re.compile(r"[.!?…][\"'”’)\]]*\s+")
_WHITESPACE_RE = re.compile(r"\s+")
_NON_SPACE_RE = re.compile(r"\S+")

_segmenter_lock = threading.Lock()
_segmenter: Any = None


@dataclass(frozen=True)
class Chunk:
    """A span of a source text: ``source[start:end] == text``."""

    text: str
    start: int
    end: int


def _get_segmenter() -> Any:
    global _segmenter
    if _segmenter is None:
        with _segmenter_lock:
            if _segmenter is None:
                import pysbd

                _segmenter = pysbd.Segmenter(language="en", clean=False, char_span=False)
    return _segmenter


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _paragraphs(text: str) -> Iterator[tuple[int, int]]:
    pos = 0
    for m in _PARAGRAPH_RE.finditer(text):
        yield pos, m.start()
        pos = m.end()
    yield pos, len(text)


def _cut_point(text: str, start: int, limit: int) -> int:
    """Best place to end a block that starts at ``start`` and may not pass ``limit``."""
    low = start + (limit - start) // 2
    newline = text.rfind("\n", low, limit)
    if newline >= 0:
        return newline + 1
    best = -1
    for m in _SENTENCE_END_RE.finditer(text, low, limit):
        best = m.end()
    if best > 0:
        return best
    for m in _WHITESPACE_RE.finditer(text, low, limit):
        best = m.end()
    return best if best > 0 else limit


def _blocks(text: str) -> Iterator[tuple[int, int]]:
    for p_start, p_end in _paragraphs(text):
        start, end = _strip_span(text, p_start, p_end)
        while end - start > _BLOCK_CHARS:
            cut = _cut_point(text, start, start + _BLOCK_CHARS)
            yield start, cut
            start, _ = _strip_span(text, cut, end)
        if start < end:
            yield start, end


def _locate(text: str, sentence: str, pos: int, end: int) -> tuple[int, int] | None:
    """Find ``sentence`` in ``text[pos:end]``, exactly or up to whitespace differences."""
    idx = text.find(sentence, pos, end)
    if idx >= 0:
        return idx, idx + len(sentence)
    words = sentence.split()
    if not words:
        return None
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
    m = pattern.search(text, pos, end)
    return (m.start(), m.end()) if m else None


def _block_sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    pieces: list[str] = _get_segmenter().processor(text[start:end]).process()
    pos = start
    for piece in pieces:
        found = _locate(text, piece.strip(), pos, end)
        if found is None:
            continue  # the gap before the next located sentence keeps this text
        s, e = found
        gap_start, gap_end = _strip_span(text, pos, s)
        if gap_start < gap_end:
            yield gap_start, gap_end
        s, e = _strip_span(text, s, e)
        if s < e:
            yield s, e
        pos = e
    gap_start, gap_end = _strip_span(text, pos, end)
    if gap_start < gap_end:
        yield gap_start, gap_end


def _regex_sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Sentence spans cut at ``. ! ?`` + whitespace: linear, for very large texts."""
    pos = start
    for m in _SENTENCE_END_RE.finditer(text, start, end):
        s, e = _strip_span(text, pos, m.end())
        if s < e:
            yield s, e
        pos = m.end()
    s, e = _strip_span(text, pos, end)
    if s < e:
        yield s, e


def iter_sentences(text: str) -> Iterator[tuple[int, int]]:
    """Sentence spans in order, lazily. pysbd reads about 60 kB/s, so a text over
    :data:`LARGE_TEXT_CHARS` is cut by a linear regex instead (chunks still end at
    sentence ends; abbreviations such as "Dr." may end a sentence there)."""
    split = _regex_sentences if len(text) > LARGE_TEXT_CHARS else _block_sentences
    for b_start, b_end in _blocks(text):
        yield from split(text, b_start, b_end)


def split_sentences(text: str) -> list[Chunk]:
    """One ``Chunk`` per sentence, in order, with exact offsets; whitespace is never a chunk."""
    return [Chunk(text[s:e], s, e) for s, e in iter_sentences(text)]


def _split_long(text: str, start: int, end: int, max_chars: int) -> Iterator[tuple[int, int]]:
    """Cut one over-long sentence at whitespace into spans of at most ``max_chars``."""
    piece_start = piece_end = -1
    for m in _NON_SPACE_RE.finditer(text, start, end):
        w_start, w_end = m.start(), m.end()
        while w_end - w_start > max_chars:  # a single "word" longer than max_chars
            if piece_start >= 0:
                yield piece_start, piece_end
                piece_start = -1
            yield w_start, w_start + max_chars
            w_start += max_chars
        if piece_start < 0:
            piece_start, piece_end = w_start, w_end
        elif w_end - piece_start <= max_chars:
            piece_end = w_end
        else:
            yield piece_start, piece_end
            piece_start, piece_end = w_start, w_end
    if piece_start >= 0:
        yield piece_start, piece_end


def _spans(text: str, max_chars: int) -> Iterator[tuple[int, int]]:
    for s, e in iter_sentences(text):
        if e - s > max_chars:
            yield from _split_long(text, s, e, max_chars)
        else:
            yield s, e


def iter_chunks(text: str, max_chars: int = 600) -> Iterator[Chunk]:
    """:func:`chunk_text`, lazily: a large text streams through in bounded memory."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    cur_start = cur_end = -1
    for s, e in _spans(text, max_chars):
        if cur_start >= 0 and e - cur_start <= max_chars:
            cur_end = e
            continue
        if cur_start >= 0:
            yield Chunk(text[cur_start:cur_end], cur_start, cur_end)
        cur_start, cur_end = s, e
    if cur_start >= 0:
        yield Chunk(text[cur_start:cur_end], cur_start, cur_end)


def chunk_text(text: str, max_chars: int = 600) -> list[Chunk]:
    """Pack whole sentences into chunks of at most ``max_chars`` characters.

    A sentence longer than ``max_chars`` is split at whitespace (or, for a single longer
    word, hard). Offsets are exact: ``text[c.start:c.end] == c.text``.
    """
    return list(iter_chunks(text, max_chars))
