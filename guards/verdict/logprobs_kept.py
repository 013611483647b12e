"""Whether the upstream's token logprobs still describe the text the client gets.

Citation markers (`` [n]`` after a claim, :mod:`guards.answer.rewrite`) and a trailing "Sources:"
block are added, never replacing a word: the logprobs still describe every token of the
answer, so they are kept (:func:`still_describes`). Any other change (a corrected or
removed claim, a flag marker, the refusal of a blocked answer, a JSON value edited in
place) replaces tokens: the logprobs are dropped, with a note that says why
(:func:`dropped_note`). Pure logic: no I/O.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from groundproxy.guards.types import ClaimAction, ClaimResult

_MARKER = re.compile(r" \[\d{1,4}\]")
# the block guards.answer.rewrite.footnote_block writes, after a blank line, at the very end
_SOURCES = re.compile(r"\n\nSources:\n\[\d{1,4}\] [^\n]*(?:\n\[\d{1,4}\] [^\n]*)*\Z")
_REWRITES: tuple[ClaimAction, ...] = ("corrected", "removed", "flagged")


def still_describes(original: str, returned: str) -> bool:
    """Is ``returned`` the ``original`` with only citation markers inserted (and a
    "Sources:" block appended)? Conservative: an original that itself holds a `` [n]``
    reads as changed."""
    if returned == original:
        return True
    body, base = returned, original
    block = _SOURCES.search(returned)
    if block is not None and not original.endswith(block.group()):
        body, base = returned[: block.start()], original.rstrip()
    if _MARKER.search(base):
        return False
    return _MARKER.sub("", body) == base


def _reason(claims: Sequence[ClaimResult], blocked: bool) -> str:
    if blocked:
        return "blocked (the refusal replaced the text)"
    counts = Counter(r.action for r in claims if r.action in _REWRITES)
    done = ", ".join(f"{counts[a]} {a}" for a in _REWRITES if counts[a])
    return f"rewritten (claims: {done})" if done else "edited beyond citation markers"


def dropped_note(claims: Sequence[ClaimResult], blocked: bool) -> str:
    """Why a whole answer's logprobs were dropped, precisely: it was blocked, or which
    claims' text was rewritten (``"… rewritten (claims: 1 corrected, 1 removed)"``)."""
    return f"logprobs dropped: the answer was {_reason(claims, blocked)}"


@dataclass
class PieceTally:
    """A streamed answer's pieces that had logprobs: how many were sent with them, and the
    claims of those whose logprobs were dropped (for one note at the end)."""

    pieces: int = 0
    dropped: int = 0
    claims: list[ClaimResult] = field(default_factory=list)
    blocked: bool = False

    def keep(self, original: str, sent: str, claims: Sequence[ClaimResult], blocked: bool) -> bool:
        """Do the logprobs of the piece ``original`` go with ``sent`` ("" when withheld)?
        ``claims``: the piece's, ``blocked``: the answer is blocked from this piece on."""
        self.pieces += 1
        if sent and not blocked and still_describes(original, sent):
            return True
        self.dropped += 1
        self.claims.extend(claims)
        self.blocked = self.blocked or blocked
        return False

    def note(self) -> str | None:
        if not self.dropped:
            return None
        reason = _reason(self.claims, self.blocked)
        return f"logprobs dropped for {self.dropped} of {self.pieces} sentences: {reason}"


class TokenQueue:
    """A stream's logprob tokens not yet sent, handed out by the characters of the pieces
    sent: each piece takes the tokens whose first visible character it holds (a token
    " Batteries" goes with the sentence it starts, not with the space before it), so a
    rewritten piece drops its own tokens, not its neighbour's."""

    def __init__(self) -> None:
        self.queue: deque[tuple[int, Any]] = deque()  # (anchor offset, token)
        self.added = 0  # characters the tokens added so far spell
        self.taken = 0  # characters of the pieces handed out so far

    def add(self, tokens: Sequence[Any]) -> None:
        for token in tokens:
            text = token.get("token") if isinstance(token, dict) else None
            text = text if isinstance(text, str) and text else " "
            lead = len(text) - len(text.lstrip()) if text.strip() else 0
            self.queue.append((self.added + lead, token))
            self.added += len(text)

    def take(self, chars: int) -> list[Any]:
        """The tokens of the next ``chars`` characters of the answer."""
        self.taken += chars
        taken: list[Any] = []
        while self.queue and self.queue[0][0] < self.taken:
            taken.append(self.queue.popleft()[1])
        return taken
