"""Cut a streamed answer into pieces that can be verified on their own (``stream: sentence``).

:class:`SentenceSegmenter` is fed the upstream's text deltas and returns, as soon as they
are complete, :class:`Segment` s whose concatenation is exactly the text fed so far:

- prose: a sentence is complete once the next one has begun (a sentence end — ".", "!",
  "?", "…" — then whitespace and a capital letter or digit, abbreviations aside:
  :func:`guards.claims.sentences.fast_sentence_spans`), or at the end of its line; a line that
  ends without closing punctuation is held until the next line shows whether it goes on
  (a soft-wrapped paragraph) or a new block starts;
- fenced code (``` / ~~~): passed through line by line, ``verify=False`` — code is never
  verified or altered;
- a table (lines holding "|") is held whole, until the first line that is not a row,
  because its header and separator rows tell cells from labels;
- a line starting like a fence, a table row, a heading or an indented block is held
  until its end, so its kind is known before any of it is cut.

Whitespace between sentences stays with the sentence before it. :meth:`flush` returns
what is left when the stream ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from groundproxy.guards.claims.markdown import FENCE_RE, ITEM_RE, QUOTE_RE
from groundproxy.guards.claims.sentences import fast_sentence_spans

_TERMINAL = re.compile(r"[.!?…:;][\"'”’)\]*_]*\s*$")
_BLOCK_START = re.compile(r"^\s*$|^ {0,3}(?:#{1,6}\s|[-*+]\s|\d{1,9}[.)]\s|>|\||`{3}|~{3})")
_HOLD_LINE = re.compile(r"^(?: {0,3}(?:`|~|#|\|)| {4}|\t)")
_BOUNDARY_HINT = re.compile(r"[.!?…][\"'”’)\]]*\s+\S")


@dataclass(frozen=True)
class Segment:
    """``text`` starts at ``offset`` in the whole answer; ``verify`` is False for code."""

    text: str
    offset: int
    verify: bool = True


class SentenceSegmenter:
    def __init__(self) -> None:
        self._buf = ""  # received, not yet returned
        self._offset = 0  # of _buf[0] in the whole answer
        self._line_start = True  # does _buf begin at the start of a line?
        self._fence: str | None = None
        self._table = ""  # table lines held
        self._held = ""  # a complete prose line held until the next line shows up

    def _out(self, out: list[Segment], text: str, verify: bool = True) -> None:
        if text:
            out.append(Segment(text, self._offset, verify))
            self._offset += len(text)

    def _flush_table(self, out: list[Segment]) -> None:
        if self._table:
            table, self._table = self._table, ""
            self._out(out, table)

    def _flush_held(self, out: list[Segment]) -> None:
        if self._held:
            held, self._held = self._held, ""
            self._out(out, held)

    def _line(self, line: str, out: list[Segment], whole: bool) -> None:
        """One complete line (with its newline); ``whole``: it starts at a line start."""
        if self._fence is not None:
            closing = line.strip()
            if closing.startswith(self._fence[0] * 3) and not closing.strip(self._fence[0]):
                self._fence = None
            self._out(out, line, verify=False)
            return
        m = FENCE_RE.match(line) if whole else None
        if m:
            self._flush_held(out)
            self._flush_table(out)
            self._fence = m.group(1)
            self._out(out, line, verify=False)
            return
        if whole and "|" in line and not self._held:
            self._table += line
            return
        self._flush_table(out)
        if self._held:
            if not whole or not _BLOCK_START.match(line):
                line = self._held + line  # a soft-wrapped paragraph goes on
                self._held = ""
            else:
                self._flush_held(out)
        if _TERMINAL.search(line) or not line.strip():
            self._out(out, line)
        else:
            self._held = line

    def feed(self, delta: str) -> list[Segment]:
        out: list[Segment] = []
        self._buf += delta
        while True:
            nl = self._buf.find("\n")
            if nl < 0:
                break
            line, self._buf = self._buf[: nl + 1], self._buf[nl + 1 :]
            self._line(line, out, self._line_start)
            self._line_start = True
        self._cut_sentences(out)
        return out

    def _cut_sentences(self, out: list[Segment]) -> None:
        """Return the complete sentences at the head of the incomplete last line."""
        tail = self._buf
        if not tail or self._fence is not None or self._table:
            return
        if self._line_start and (_HOLD_LINE.match(tail) or len(tail) < 4):
            return
        if not _BOUNDARY_HINT.search(tail):
            return
        if self._held:
            if self._line_start and (ITEM_RE.match(tail) or QUOTE_RE.match(tail)):
                self._flush_held(out)
            else:
                tail = self._held + tail
        spans = fast_sentence_spans(tail)
        if len(spans) < 2:
            return
        cut = spans[-1][0]
        self._held = ""
        self._out(out, tail[:cut])
        self._buf = tail[cut:]
        self._line_start = False  # what remains starts mid-paragraph

    def holding(self) -> bool:
        """Is text held, waiting for a sentence end?"""
        return bool(self._buf or self._held or self._table)

    def release(self) -> list[Segment]:
        """Everything held, now, mid-answer (sentence mode's ``max_hold_ms``): as
        :meth:`flush`, but a code fence stays open and the next text continues the line."""
        fence, mid_line = self._fence, bool(self._buf)
        out = self.flush()
        self._fence = fence
        if mid_line:
            self._line_start = False
        return out

    def flush(self) -> list[Segment]:
        out: list[Segment] = []
        if self._fence is not None:
            self._out(out, self._buf, verify=False)
        else:
            if self._table and self._line_start and "|" in self._buf:
                self._table += self._buf  # a last table row without its newline
                self._buf = ""
            self._flush_table(out)
            tail, self._held = self._held + self._buf, ""
            self._out(out, tail)
        self._buf = ""
        return out
