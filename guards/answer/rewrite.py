"""The returned answer text, built from the original answer and each claim's action.

Which action each claim gets, and when the whole answer is refused instead, is decided in
:mod:`guards.action`; this module only edits the text accordingly:

- ``corrected``: the claim's span is replaced by the correction;
- ``removed``: the claim goes, together with a coordinating connector (", and", "; ") it
  shared with a neighbouring clause; a list item or quote line left empty is dropped, as
  is a paragraph line left empty;
- ``flagged``: ``actions.flag_marker`` is inserted after the claim's words;
- ``kept`` and ``annotated``: the text is left alone.

Markers go after a claim's last word, before its closing punctuation ("lasts 12 months
[1]."). Citations: ``none``; ``inline`` adds " [n]" after each kept or corrected claim, n
numbering the distinct cited chunks in order of first use; ``footnotes`` adds the same
markers and a "Sources:" block at the end. Text outside claim spans (code blocks,
headings, bullets, table pipes) is never touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from groundproxy.guards.types import ClaimResult, Evidence
from groundproxy.policies.schema import Policy

QUOTE_CHARS = 100
_CLOSERS = ".!?…\"'”’)*_"
_CONNECTOR_AFTER = re.compile(r"[ \t]*(?:,[ \t]*(?:and|but)|;|[ \t](?:and|but))[ \t]+")
_CONNECTOR_BEFORE = re.compile(r"(?:,[ \t]*(?:and|but)|;|[ \t](?:and|but))[ \t]*$")
_MARKER_ONLY = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)]|>)?[ \t]*(?:\[[ xX]\][ \t]*)?")


@dataclass
class _Edit:
    start: int
    end: int
    text: str


def _word_end(answer: str, start: int, end: int) -> int:
    """Where a marker goes: after the claim's last word, before closing punctuation."""
    pos = end
    while pos > start and answer[pos - 1] in _CLOSERS:
        pos -= 1
    return pos if pos > start else end


def _quote(e: Evidence) -> str:
    text = " ".join(e.text.split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rstrip() + "…"


def _line_bounds(answer: str, pos: int) -> tuple[int, int]:
    start = answer.rfind("\n", 0, pos) + 1
    end = answer.find("\n", pos)
    return start, len(answer) if end < 0 else end


def _removal(answer: str, start: int, end: int) -> tuple[_Edit, int | None]:
    """The edit that removes a claim, and a position to capitalize afterwards."""
    after = _CONNECTOR_AFTER.match(answer, end)
    if after and after.end() < len(answer) and answer[after.end()].isalpha():
        # the next clause now opens the sentence when the removed one did
        opened = answer[start : start + 1].isupper()
        return _Edit(start, after.end(), ""), after.end() if opened else None
    before = _CONNECTOR_BEFORE.search(answer, 0, start)
    if before and before.start() > _line_bounds(answer, start)[0]:
        closing = answer[_word_end(answer, start, end) : end]
        return _Edit(before.start(), end, closing.strip("*_\"'”’)")), None
    stop = end
    while stop < len(answer) and answer[stop] in " \t":
        stop += 1
    begin = start
    if stop >= len(answer) or answer[stop] in "\n|":
        while begin > 0 and answer[begin - 1] in " \t":
            begin -= 1
        if stop < len(answer) and answer[stop] == "|":
            begin, stop = start, end  # keep a table cell's padding
    return _Edit(begin, stop, ""), None


def _drop_empty_lines(answer: str, removals: list[_Edit]) -> list[_Edit]:
    """Whole-line removals for lines that removals leave with only a marker or nothing.

    A paragraph that disappears takes one of the blank lines around it along.
    """
    gone = bytearray(len(answer))
    for r in removals:
        gone[r.start : r.end] = b"\x01" * (r.end - r.start)
    out: list[_Edit] = []
    for ls in sorted({_line_bounds(answer, r.start)[0] for r in removals}):
        le = _line_bounds(answer, ls)[1]
        rest = "".join(ch for i, ch in enumerate(answer[ls:le], ls) if not gone[i])
        if not _MARKER_ONLY.fullmatch(rest):
            continue
        if le < len(answer):
            start, end = ls, le + 1
            prev_blank = ls == 0 or answer[: ls - 1].rsplit("\n", 1)[-1].strip() == ""
            nle = _line_bounds(answer, end)[1]
            if prev_blank and not answer[end:nle].strip():
                end = min(nle + 1, len(answer))
        else:
            start, end = max(ls - 1, 0), le
        out.append(_Edit(start, end, ""))
    return out


def _apply(answer: str, edits: list[_Edit], capitalize: set[int]) -> str:
    """Apply non-overlapping edits; an edit inside an earlier, wider one is dropped.

    Insertions sort before a removal at the same offset; the first letter emitted at
    an offset in ``capitalize`` is upper-cased (a clause that now starts a sentence).
    """
    edits = sorted(edits, key=lambda e: (e.start, e.end > e.start, -(e.end - e.start)))
    kept: list[_Edit] = []
    for e in edits:
        if not kept or e.start >= kept[-1].end:
            kept.append(e)
    out: list[str] = []
    pending = False

    def emit(piece: str) -> None:
        nonlocal pending
        if pending and piece:
            piece = piece[:1].upper() + piece[1:]
            pending = False
        out.append(piece)

    pos = 0
    for e in kept:
        pending = pending or pos in capitalize
        emit(answer[pos : e.start])
        pending = pending or e.start in capitalize
        emit(e.text)
        pos = e.end
    pending = pending or pos in capitalize
    emit(answer[pos:])
    return "".join(out)


Cited = dict[str, tuple[int, Evidence]]  # Evidence.ref → (footnote number, evidence)


def footnote_block(cited: Cited) -> str:
    """The "Sources:" block (without the blank line before it)."""
    notes = [f'[{n}] {key} — "{_quote(e)}"' for key, (n, e) in cited.items()]
    return "Sources:\n" + "\n".join(notes)


def rewrite_text(
    answer: str,
    results: Sequence[ClaimResult],
    policy: Policy,
    *,
    cited: Cited | None = None,
    segment: bool = False,
) -> str:
    """The answer with each claim's ``ClaimResult.action`` (set by :mod:`guards.action`)
    carried out: ``kept`` / ``corrected`` claims get a citation marker, ``corrected`` ones
    their correction, ``removed`` ones go, ``flagged`` ones get the flag marker.

    ``segment`` renders one piece of a streamed answer (``stream: sentence``): citation
    numbers continue in the caller's ``cited`` map and no "Sources:" block is appended (the
    stream appends it once, at the end).
    """
    cited = {} if cited is None else cited
    edits: list[_Edit] = []
    removals: list[_Edit] = []
    capitalize: set[int] = set()

    def marker(r: ClaimResult) -> str:
        if policy.citations == "none" or not r.citations:
            return ""
        e = r.citations[0]
        if e.ref not in cited:
            cited[e.ref] = (len(cited) + 1, e)
        return f" [{cited[e.ref][0]}]"

    for r in sorted(results, key=lambda r: r.claim.span):
        start, end = r.claim.span
        at = _word_end(answer, start, end)
        if r.action == "kept":
            edits.append(_Edit(at, at, marker(r)))
        elif r.action == "corrected" and r.correction:
            fixed = r.correction
            cut = _word_end(fixed, 0, len(fixed))
            edits.append(_Edit(start, end, fixed[:cut] + marker(r) + fixed[cut:]))
        elif r.action == "removed":
            edit, cap = _removal(answer, start, end)
            removals.append(edit)
            if cap is not None:
                capitalize.add(cap)
        elif r.action == "flagged":
            edits.append(_Edit(at, at, policy.actions.flag_marker))
    text = _apply(answer, [*edits, *removals, *_drop_empty_lines(answer, removals)], capitalize)
    if removals and answer == answer.rstrip():
        text = text.rstrip()  # a removed last paragraph leaves no trailing blank line
    if policy.citations == "footnotes" and cited and not segment:
        text = text.rstrip() + "\n\n" + footnote_block(cited)
    return text
