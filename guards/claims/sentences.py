"""Sentence spans with exact character offsets (pysbd, English).

pysbd (``clean=False``) returns verbatim pieces of its input; their offsets are found
here by walking forward with a cursor, so a repeated sentence ("Yes. Yes.") is never
anchored to an earlier occurrence (pysbd's own ``char_span`` mode re-finds each
sentence with a regex over the whole text).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import pysbd

from groundproxy.errors import GuardTimeoutError

_WS = " \t\r\n\f\v"
_ALNUM = re.compile(r"\w")
_TAIL = "\"'”’)]*_.!?… \t\r\n"
_INNER_STOP = re.compile(r"[.!?…]")


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


Stop = Callable[[], bool]
WINDOW_CHARS = 1000  # pysbd's cost grows faster than linearly: long pieces go in windows


def _windows(piece: str) -> list[tuple[int, int]]:
    """[start, end) windows of ``piece``, about WINDOW_CHARS each, cut only where the
    linear splitter sees a sentence end (pysbd then refines each window)."""
    if len(piece) <= WINDOW_CHARS:
        return [(0, len(piece))]
    windows: list[tuple[int, int]] = []
    w_start = 0
    for _, end in fast_sentence_spans(piece):
        if end - w_start >= WINDOW_CHARS:
            windows.append((w_start, end))
            w_start = end
    if w_start < len(piece):
        windows.append((w_start, len(piece)))
    return windows


def _segment(
    text: str, start: int, stop: int, piece: str, halt: Stop | None = None
) -> list[tuple[int, int]]:
    """pysbd over ``piece`` (== text[start:stop] up to newline replacement), window by
    window; ``halt`` (true past the caller's deadline) is checked between windows."""
    if not _INNER_STOP.search(piece.rstrip(_TAIL)):
        return [(start, stop)]  # no sentence end inside: one sentence, skip pysbd
    spans: list[tuple[int, int]] = []
    for w_start, w_end in _windows(piece):
        if halt is not None and halt():
            raise GuardTimeoutError("guard stopped at its deadline")
        spans += _segment_window(start + w_start, piece[w_start:w_end])
    return spans


def _segment_window(start: int, piece: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    cursor = 0
    # pysbd's own ``segment`` then re-finds every sentence with a freshly compiled regex
    # over the whole piece (re's cache thrashes: ~half its time); its processor's output
    # is the same list of verbatim sentences, anchored here with the cursor.
    for sent in _segmenter().processor(piece).process():
        if not sent:
            continue
        at = piece.find(sent, cursor)
        if at < 0:  # pysbd altered the text (should not happen with clean=False)
            sent = sent.strip()
            at = piece.find(sent, cursor) if sent else -1
            if at < 0:
                continue
        spans.append((start + at, start + at + len(sent)))
        cursor = at + len(sent)
    return spans


def sentence_spans(
    text: str,
    start: int = 0,
    end: int | None = None,
    *,
    join_lines: bool = False,
    halt: Stop | None = None,
) -> list[tuple[int, int]]:
    """Sentences of ``text[start:end]`` as trimmed [start, end) offsets into ``text``.

    pysbd ends a sentence at every newline; the text is therefore cut at newlines first
    (same result, and pysbd's cost grows faster than linearly with length), and a line
    with no ".", "!", "?" or "…" before its end is one sentence without calling pysbd.
    ``join_lines`` treats single newlines as spaces instead (a soft-wrapped paragraph);
    offsets are unaffected (same length). Spans with no letter or digit are dropped.
    ``halt`` (true past the caller's deadline) raises GuardTimeoutError between windows.
    """
    stop = len(text) if end is None else end
    if not text[start:stop].strip():
        return []
    if join_lines:
        pieces = [(start, stop, text[start:stop].replace("\n", " "))]
    else:
        pieces = []
        pos = start
        for line in text[start:stop].split("\n"):
            if line.strip():
                pieces.append((pos, pos + len(line), line))
            pos += len(line) + 1
    spans: list[tuple[int, int]] = []
    for p_start, p_stop, piece in pieces:
        for s, e in _segment(text, p_start, p_stop, piece, halt):
            s, e = trim_span(text, s, e)
            if e > s and _ALNUM.search(text, s, e):
                spans.append((s, e))
    return spans


_ABBREVIATION_LIST = (
    "mr mrs ms dr prof st sr jr vs etc e.g i.e inc ltd co corp no nos fig figs approx "
    "dept est jan feb mar apr jun jul aug sep sept oct nov dec mt ft u.s u.k a.m p.m"
)
_ABBREVIATIONS = frozenset(_ABBREVIATION_LIST.split())
_BOUNDARY = re.compile(r"[.!?…]+[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])|\n")


def fast_sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """A regex sentence splitter for long evidence texts, linear in their length.

    pysbd costs ~10 ms per multi-sentence line (it compiles regexes per input), too much
    for a long system prompt inside a latency budget. This cuts after ".", "!", "?" or
    "…" followed by whitespace and a capital letter or digit, and at newlines, except
    after common abbreviations and single-letter initials. Same span conventions as
    :func:`sentence_spans`.
    """
    stop = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    seg_start = start
    for m in _BOUNDARY.finditer(text, start, stop):
        if m.group() != "\n":
            word = text[max(seg_start, m.start() - 12) : m.start()].split()
            last = word[-1].lower().rstrip(".") if word else ""
            if last in _ABBREVIATIONS or "." in last or (len(last) == 1 and last.isalpha()):
                continue
        s, e = trim_span(text, seg_start, m.end())
        if e > s and _ALNUM.search(text, s, e):
            spans.append((s, e))
        seg_start = m.end()
    s, e = trim_span(text, seg_start, stop)
    if e > s and _ALNUM.search(text, s, e):
        spans.append((s, e))
    return spans


def guard_cut(answer: str, cap: int) -> int:
    """Where the verified part of ``answer`` ends: all of it up to ``cap`` characters, else
    the last sentence end (or line end) before ``cap`` (``cap`` itself if none is near)."""
    if len(answer) <= cap:
        return len(answer)
    cut = max(answer.rfind(sep, 0, cap) + len(sep) for sep in ("\n", ". ", "! ", "? "))
    return cut if cut > cap // 2 else cap
