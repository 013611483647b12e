"""Where the prose is in a markdown answer.

:func:`prose_blocks` walks the answer line by line and returns the spans that may hold
claims: paragraphs, list-item text (bullet excluded), blockquote text (marker excluded)
and table body cells (pipes excluded). Fenced code, indented code, headings, horizontal
rules, table header/separator rows and HTML comment lines are skipped. Every span is an
exact [start, end) into the answer, trimmed of surrounding whitespace.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Literal

from groundproxy.guards.claims.sentences import trim_span

BlockKind = Literal["paragraph", "item", "quote", "cell"]

FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING_RE = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
HR_RE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
SETEXT_RE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
ITEM_RE = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
QUOTE_RE = re.compile(r"^ {0,3}(?:>[ \t]?)+")
TABLE_SEP_RE = re.compile(r"^[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(?:\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*$")
INDENTED_RE = re.compile(r"^(?: {4}|\t)")
COMMENT_RE = re.compile(r"^[ \t]*<!--.*-->[ \t]*$")


@dataclass(frozen=True)
class Block:
    """A prose span of the answer and what kind of markdown holds it."""

    kind: BlockKind
    span: tuple[int, int]


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, end excluding the newline."""
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def _cells(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cell spans of one table row (unescaped pipes are separators)."""
    cuts = [start - 1]
    i = start
    while i < end:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "|":
            cuts.append(i)
        i += 1
    cuts.append(end)
    spans: list[tuple[int, int]] = []
    for a, b in itertools.pairwise(cuts):
        s, e = trim_span(text, a + 1, b)
        if e > s:
            spans.append((s, e))
    return spans


def _is_table_row(line: str) -> bool:
    return line.count("|") >= 1 and (line.lstrip().startswith("|") or line.count("|") >= 2)


def prose_blocks(text: str) -> list[Block]:
    """Prose spans of a markdown ``text`` in reading order (see the module docstring)."""
    lines = _lines(text)
    blocks: list[Block] = []
    open_block: list[int] | None = None  # [start, end] of the block being read
    open_kind: BlockKind | None = None
    fence: str | None = None
    prev_blank = True
    in_list = False
    in_table = False

    def close() -> None:
        nonlocal open_block, open_kind
        if open_block is not None and open_kind is not None:
            s, e = trim_span(text, open_block[0], open_block[1])
            if e > s:
                blocks.append(Block(open_kind, (s, e)))
        open_block, open_kind = None, None

    for n, (ls, le) in enumerate(lines):
        line = text[ls:le]
        if fence is not None:
            closing = line.strip()
            if closing.startswith(fence[0] * 3) and not closing.strip(fence[0]):
                fence = None if len(closing) >= len(fence) else fence
            prev_blank = False
            continue
        m = FENCE_RE.match(line)
        if m:
            close()
            fence = m.group(1)
            in_table = False
            in_list = False
            prev_blank = False
            continue
        if not line.strip():
            close()
            prev_blank = True
            in_table = False
            continue
        if INDENTED_RE.match(line) and prev_blank and not in_list:
            close()  # indented code block
            prev_blank = False
            continue
        if INDENTED_RE.match(line) and open_kind is None and not in_list:
            prev_blank = False
            continue  # continuation of an indented code block
        if HEADING_RE.match(line) or HR_RE.match(line) or COMMENT_RE.match(line):
            close()
            in_list = False
            in_table = False
            prev_blank = False
            continue
        if SETEXT_RE.match(line) and open_kind == "paragraph":
            open_block, open_kind = None, None  # the paragraph was a setext heading
            prev_blank = False
            continue
        nxt = text[lines[n + 1][0] : lines[n + 1][1]] if n + 1 < len(lines) else ""
        if TABLE_SEP_RE.match(line) and "|" in line:
            in_table = True
            prev_blank = False
            continue
        if _is_table_row(line) and (in_table or (TABLE_SEP_RE.match(nxt) and "|" in nxt)):
            close()
            if in_table:
                blocks.extend(Block("cell", span) for span in _cells(text, ls, le))
            prev_blank = False
            continue  # a header row (followed by the separator) holds labels, not claims
        in_table = False
        m = ITEM_RE.match(line)
        if m:
            close()
            in_list = True
            open_block, open_kind = [ls + m.end(), le], "item"
            prev_blank = False
            continue
        m = QUOTE_RE.match(line)
        if m:
            close()  # one block per quoted line keeps the ">" markers out of every span
            open_block, open_kind = [ls + m.end(), le], "quote"
            close()
            prev_blank = False
            continue
        if open_kind in ("paragraph", "item") and not prev_blank:
            assert open_block is not None
            open_block[1] = le  # lazy continuation line
        else:
            close()
            if not INDENTED_RE.match(line):
                in_list = False
            open_block, open_kind = [ls, le], "item" if in_list else "paragraph"
        prev_blank = False
    close()
    return blocks
