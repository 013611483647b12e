"""Streamed answers cut into verifiable pieces (stream: sentence)."""

from __future__ import annotations

import random

from groundproxy.guards.claims.segments import Segment, SentenceSegmenter

MARKDOWN = (
    "# Warranty\n\nThe warranty lasts 24 months. Dr. Smith said so, e.g. in 2021.\n\n"
    "- Batteries: 6 months\n- Motors are covered too. Brushes are not.\n\n"
    "```python\nprint('Not verified. Ever.')\n```\n\n"
    "| part | months |\n|---|---|\n| battery | 6 |\n\n"
    "A soft-wrapped\nsentence ends here. Done"
)


def feed_all(text: str, seed: int) -> list[Segment]:
    rng = random.Random(seed)
    seg, out, i = SentenceSegmenter(), [], 0
    while i < len(text):
        n = rng.randint(1, 7)
        out += seg.feed(text[i : i + n])
        i += n
    return out + seg.flush()


def test_segments_cover_the_text_exactly_whatever_the_deltas() -> None:
    for seed in range(20):
        out = feed_all(MARKDOWN, seed)
        assert "".join(s.text for s in out) == MARKDOWN
        assert all(MARKDOWN[s.offset : s.offset + len(s.text)] == s.text for s in out)


def test_sentences_code_tables_and_wrapped_lines() -> None:
    out = feed_all(MARKDOWN, 1)
    texts = [s.text for s in out if s.verify]
    assert "The warranty lasts 24 months. " in texts
    assert "Dr. Smith said so, e.g. in 2021.\n" in texts  # abbreviations do not cut
    assert "- Motors are covered too. " in texts
    assert "| part | months |\n|---|---|\n| battery | 6 |\n" in texts  # a table is held whole
    assert "A soft-wrapped\nsentence ends here. " in texts  # a wrapped line is not cut
    code = [s.text for s in out if not s.verify]
    assert "print('Not verified. Ever.')\n" in code
    assert all("print" not in t for t in texts)


def test_a_sentence_is_released_once_the_next_begins() -> None:
    seg = SentenceSegmenter()
    assert seg.feed("The warranty lasts 24 months.") == []
    assert seg.feed(" Batteries") == [Segment("The warranty lasts 24 months. ", 0)]
    assert seg.flush() == [Segment("Batteries", 30)]
