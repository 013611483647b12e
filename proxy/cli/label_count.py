"""Which of a tenant's labels count toward ``calibrate --fit`` (issue 40 item 3).

A reviewer's label (``source: reviewer``: an admin key, a labels file) always counts. A
judge label (``source: judge``, from ``judge.labels``) is caused by a client's request, so
any client key of the tenant can write many of them, and an injected judge can invert them:

- **a burst is not evidence**: at most :data:`JUDGE_LABELS_PER_KEY` judge labels per client
  key count within any :data:`WINDOW_S` seconds (sliding, oldest first); the rest of the
  burst is left out of the fit;
- **a client never outvotes a rule**: a judge label that calls an answer correct although a
  value rule contradicts it (a wrong or denied number, date or name) is left out.

What is left of the judge labels may train a refit, never decide it: the labels held back
to decide whether a refit replaces the decision in force are reviewers' only
(:mod:`groundproxy.proxy.cli.adapt_fit`). Pure: labels in, what counts out.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from groundproxy.proxy.storage.feedback import Labelled

JUDGE_LABELS_PER_KEY = 5
WINDOW_S = 600.0


@dataclass(frozen=True)
class Counted:
    """How many labels of each kind there were and how many count."""

    reviewer: int = 0
    judge: int = 0
    burst: int = 0  # judge labels over the per-key cap
    outvoting: int = 0  # judge labels calling a rule-contradicted answer correct

    @property
    def judge_counted(self) -> int:
        return self.judge - self.burst - self.outvoting

    def line(self) -> str:
        """One line for the CLI's output."""
        head = f"labels: {self.reviewer} from reviewers, {self.judge} from the judge"
        if not self.judge:
            return head
        return (
            f"{head} ({self.judge_counted} counted: at most {JUDGE_LABELS_PER_KEY} per client "
            f"key per {WINDOW_S / 60:g} minutes, {self.burst} over that left out; "
            f"{self.outvoting} calling an answer a value rule contradicts correct left out; "
            "judge labels may train a refit, only reviewers' labels decide it)"
        )


def within_burst_cap(items: Sequence[Labelled]) -> list[bool]:
    """Per label: does it count under the per-key cap? (Reviewers' labels always do.)"""
    keep = [True] * len(items)
    recent: dict[str | None, deque[float]] = defaultdict(deque)
    judged = sorted((it.created, i) for i, it in enumerate(items) if it.source == "judge")
    for created, i in judged:
        seen = recent[items[i].key]
        while seen and created - seen[0] >= WINDOW_S:
            seen.popleft()
        if len(seen) >= JUDGE_LABELS_PER_KEY:
            keep[i] = False
        else:
            seen.append(created)
    return keep


def outvotes_rule(item: Labelled, rule_contradicted: bool) -> bool:
    """A judge label that calls an answer a value rule contradicts correct."""
    return item.source == "judge" and rule_contradicted and item.label_hallucinated == 0


def counted(items: Sequence[Labelled], capped: Sequence[bool], ruled: Sequence[bool]) -> Counted:
    """The figures of :class:`Counted` (``capped``: :func:`within_burst_cap`; ``ruled``:
    per label, whether a value rule contradicts its answer — None for one left out)."""
    judge = [i for i, it in enumerate(items) if it.source == "judge"]
    return Counted(
        reviewer=len(items) - len(judge),
        judge=len(judge),
        burst=sum(1 for i in judge if not capped[i]),
        outvoting=sum(1 for i in judge if capped[i] and outvotes_rule(items[i], ruled[i])),
    )
