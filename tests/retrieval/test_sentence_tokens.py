"""Token states stored at ingest (retrieval.sentence_tokens): made in the sentence-vector pass
of the real MiniLM, stored row-aligned with the sentence keys across generations, equal to
the live ones, and read by the token alignment instead of a second model pass."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from groundproxy.errors import IndexStoreError
from groundproxy.guards.types import Embedder
from groundproxy.models.token_alignment import alignments
from groundproxy.retrieval.generations import read_current
from groundproxy.retrieval.ingest import ingest_texts
from groundproxy.retrieval.onnx_embedder import OnnxEmbedder
from groundproxy.retrieval.sentence_tokens import OFFSETS_FILE, STATES_FILE
from groundproxy.retrieval.sentence_vectors import StoredSentenceVectors, chunk_sentences
from groundproxy.retrieval.tenant_index import TenantIndex
from groundproxy.retrieval.token_states import TokenStates

HANDBOOK = (
    "handbook",
    "The warranty on all company laptops lasts 12 months from the date of purchase. "
    "Employees may work remotely two days per week.\n\nHotel costs are capped at 150 euros "
    "per night. Dr. Smith approves travel over 2,000 euros.",
)
FAQ = (
    "faq",
    "Our support desk is open from 9 am to 5 pm on weekdays. Password resets are handled "
    "through the IT service portal.",
)


def _live_generation(data: Path) -> Path:
    pointer = read_current(data / "t", "t")
    assert pointer is not None
    return data / "t" / pointer.generation


def _store(data: Path, minilm: Embedder) -> StoredSentenceVectors:
    store = TenantIndex.open(data, "t", embedder=minilm).sentences
    assert store is not None
    return store


def _all_sentences(*docs: tuple[str, str]) -> list[str]:
    return list(dict.fromkeys(s for _, text in docs for s in chunk_sentences(text)))


def _assert_live_equal(store: StoredSentenceVectors, texts: list[str], minilm: Embedder) -> None:
    assert isinstance(minilm, OnnxEmbedder)
    stored = store.token_states(texts)
    live = minilm.token_states(texts)
    for text, s, ref in zip(texts, stored, live, strict=True):
        assert s is not None, text
        assert s.shape == ref.states.shape and s.dtype == np.float16
        np.testing.assert_allclose(s.astype(np.float32), ref.states, atol=2e-3)


def test_ingest_stores_every_sentences_token_states_across_generations(
    tmp_path: Path, minilm: Embedder
) -> None:
    ingest_texts(tmp_path, "t", [HANDBOOK], minilm)
    first = _store(tmp_path, minilm)
    assert first.tokens is not None and first.tokens.rows == first.count
    _assert_live_equal(first, _all_sentences(HANDBOOK), minilm)
    assert first.token_states(["A sentence nobody ingested."]) == [None]

    ingest_texts(tmp_path, "t", [FAQ], minilm)  # a second generation: base rows + new rows
    second = _store(tmp_path, minilm)
    assert second.count > first.count and second.tokens is not None
    _assert_live_equal(second, _all_sentences(HANDBOOK, FAQ), minilm)


def test_switched_off_then_on_old_rows_are_embedded_live(
    tmp_path: Path, minilm: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDPROXY_TOKEN_STATES", "0")
    ingest_texts(tmp_path, "t", [HANDBOOK], minilm)
    gen = _live_generation(tmp_path)
    assert not (gen / OFFSETS_FILE).exists() and not (gen / STATES_FILE).exists()
    assert _store(tmp_path, minilm).tokens is None
    monkeypatch.setenv("GROUNDPROXY_TOKEN_STATES", "1")
    ingest_texts(tmp_path, "t", [FAQ], minilm)
    store = _store(tmp_path, minilm)
    old, new = _all_sentences(HANDBOOK), _all_sentences(FAQ)
    assert all(s is None for s in store.token_states([t for t in old if t not in new]))
    _assert_live_equal(store, new, minilm)
    # an ingest that meets the old sentences again (the handbook under a new id) gives them
    # their states; the rows are replaced, not duplicated
    count = store.count
    ingest_texts(tmp_path, "t", [("handbook-v2", HANDBOOK[1])], minilm)
    again = _store(tmp_path, minilm)
    assert again.count == count
    _assert_live_equal(again, old + new, minilm)


def test_inconsistent_token_states_are_a_store_error(tmp_path: Path, minilm: Embedder) -> None:
    ingest_texts(tmp_path, "t", [HANDBOOK], minilm)
    gen = _live_generation(tmp_path)
    offsets = np.load(gen / OFFSETS_FILE)
    np.save(gen / OFFSETS_FILE, offsets[:-1])  # one row short
    with pytest.raises(IndexStoreError, match="token states"):
        StoredSentenceVectors.load(gen)


class _Spy:
    """The real embedder, recording what the alignment asks it to embed."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner = inner
        self.asked: list[str] = []
        self.keep_token_states = True

    def token_states(self, texts: Sequence[str]) -> list[TokenStates]:
        self.asked += list(texts)
        return self.inner.token_states(texts)


def test_alignment_reads_the_stored_states_not_a_second_pass(
    tmp_path: Path, minilm: Embedder
) -> None:
    assert isinstance(minilm, OnnxEmbedder)
    ingest_texts(tmp_path, "t", [HANDBOOK, FAQ], minilm)
    store = _store(tmp_path, minilm)
    claims = [
        ("The laptop warranty lasts 12 months.", [HANDBOOK[1]]),
        ("The laptop warranty lasts 48 months.", [HANDBOOK[1]]),
        ("The support desk opens at 7 am on Sundays.", [FAQ[1]]),
    ]
    spy = _Spy(minilm)
    stored = alignments(spy, claims, None, [store])
    assert set(spy.asked) == {c for c, _ in claims}  # only the claims: no evidence sentence
    live_spy = _Spy(minilm)
    live = alignments(live_spy, claims, None)
    assert len(live_spy.asked) > len(claims)  # without the store the sentences are embedded
    np.testing.assert_allclose(stored, live, atol=2e-3)
    assert stored[0][1] > stored[1][1]  # "48" has no twin in the evidence, "12" has
