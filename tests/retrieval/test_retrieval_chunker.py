from __future__ import annotations

import time

import pytest

from groundproxy.retrieval.chunker import Chunk, chunk_text, split_sentences

TEXTS = [
    "Dr. Smith went to Washington.  He paid $3.50 for coffee! Was it good?\nYes.",
    "Café crème — très bon. Ça coûte 3 €. 東京は大きい。 Emoji 🎉 party time! Done.",
    "  \n\n  Leading whitespace. Trailing whitespace.   \n\n",
    "No terminal punctuation here",
    "Line one\nLine two\n\n\nNew paragraph.\tTabbed sentence.",
    "e\u0301te\u0301 (combining accents) is fine. The U.S. economy grew 2.5% in Q3.",
]


def _check_exact(text: str, chunks: list[Chunk]) -> None:
    previous_end = 0
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert c.text == c.text.strip() and c.text
        assert c.start >= previous_end
        previous_end = c.end


@pytest.mark.parametrize("text", TEXTS)
def test_sentences_have_exact_offsets_and_cover_all_text(text: str) -> None:
    sentences = split_sentences(text)
    _check_exact(text, sentences)
    covered = "".join(s.text for s in sentences)
    assert covered.replace(" ", "") == "".join(text.split()).replace(" ", "")


def test_sentence_boundaries_are_sensible() -> None:
    got = [s.text for s in split_sentences(TEXTS[0])]
    assert got == [
        "Dr. Smith went to Washington.",
        "He paid $3.50 for coffee!",
        "Was it good?",
        "Yes.",
    ]
    unicode = [s.text for s in split_sentences(TEXTS[1])]
    assert unicode[0] == "Café crème — très bon."
    assert any("🎉" in s for s in unicode)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("max_chars", [20, 60, 600])
def test_chunks_exact_and_bounded(text: str, max_chars: int) -> None:
    chunks = chunk_text(text, max_chars)
    _check_exact(text, chunks)
    assert all(len(c.text) <= max_chars for c in chunks)


def test_chunks_pack_whole_sentences() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(20))
    chunks = chunk_text(text, 100)
    _check_exact(text, chunks)
    assert len(chunks) < 20  # several sentences per chunk
    for c in chunks:
        assert c.text.startswith("Sentence number") and c.text.endswith("is here.")


def test_long_sentence_split_at_whitespace() -> None:
    text = "Intro. " + " ".join(f"word{i}" for i in range(300)) + " end. Outro."
    chunks = chunk_text(text, 80)
    _check_exact(text, chunks)
    assert all(len(c.text) <= 80 for c in chunks)
    words = {w for c in chunks for w in c.text.split()}
    assert {"word0", "word299", "Outro."} <= words  # no word was cut


def test_single_huge_word_is_hard_split() -> None:
    text = "Start. " + "x" * 250 + " stop."
    chunks = chunk_text(text, 100)
    _check_exact(text, chunks)
    assert max(len(c.text) for c in chunks) == 100
    assert sum(c.text.count("x") for c in chunks) == 250


def test_empty_and_whitespace() -> None:
    assert chunk_text("") == []
    assert chunk_text(" \n\t ") == []
    assert split_sentences("   ") == []
    with pytest.raises(ValueError):
        chunk_text("abc", 0)


def test_large_text_is_fast_and_exact() -> None:
    text = (
        "\n\n".join(
            " ".join(
                f"Paragraph {p} says thing {i}. It costs ${i}.50 in the U.S." for i in range(8)
            )
            for p in range(300)
        )
        + " "
        + "A run-on sentence without breaks " * 300
    )
    started = time.perf_counter()
    chunks = chunk_text(text)
    elapsed = time.perf_counter() - started
    _check_exact(text, chunks)
    assert elapsed < 8.0, f"chunking {len(text)} chars took {elapsed:.1f}s"
    assert sum(len(c.text) for c in chunks) > 0.9 * len(text)
