"""The verifier's evidence sentences on PostgreSQL (retrieval.pg_sentences), against a real
server and the real MiniLM: stored in the ingest's transaction, found by the guard's search
evidence, equal to the live vectors and token states, per tenant, and rolled back with a
failed ingest."""

from __future__ import annotations

import numpy as np
import pytest

from groundproxy.proxy.storage.backends import PostgresStorage, ingest_texts
from groundproxy.retrieval.embedder import load_embedder
from groundproxy.retrieval.onnx_embedder import OnnxEmbedder
from groundproxy.retrieval.pg_index import PgTenantIndex
from groundproxy.retrieval.pg_writer import PgIndexWriter
from groundproxy.retrieval.sentence_vectors import chunk_sentences
from groundproxy.testing.embedders import HASHING

pytestmark = pytest.mark.slow

HANDBOOK = (
    "The warranty on all company laptops lasts 12 months from the date of purchase. "
    "Employees may work remotely two days per week.\n\nHotel costs are capped at 150 euros "
    "per night. Dr. Smith approves travel over 2,000 euros."
)
FAQ = "Our support desk is open from 9 am to 5 pm on weekdays. Password resets go via the portal."


@pytest.fixture(scope="module")
def minilm() -> OnnxEmbedder:
    emb = load_embedder("minilm")
    assert isinstance(emb, OnnxEmbedder)
    return emb


def _rows(storage: PostgresStorage, tenant: str) -> int:
    with storage.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM gp_sentences WHERE tenant = %s", (tenant,))
        return int(row.fetchone()[0])


def _index(storage: PostgresStorage, tenant: str, minilm: OnnxEmbedder) -> PgTenantIndex:
    index = storage.indexes(minilm).refresh(tenant)
    assert isinstance(index, PgTenantIndex)
    return index


def test_ingest_stores_the_sentences_the_guard_reads(
    storage: PostgresStorage, minilm: OnnxEmbedder
) -> None:
    ingest_texts(storage, "acme", [("handbook.md", HANDBOOK)], minilm)
    index = _index(storage, "acme", minilm)
    store = index.sentences
    assert store is not None and store.embedder == minilm.name
    hits = index.search(minilm.encode(["How long is the laptop warranty?"]), 2, 0.0)[0]
    assert hits and all(h.sentences is store for h in hits)  # the verifier finds them there
    wanted = chunk_sentences(HANDBOOK)
    vectors, states = store.lookup(wanted), store.token_states(wanted)
    live = minilm.token_states(wanted)
    for v, s, ref, text in zip(vectors, states, live, wanted, strict=True):
        assert v is not None and s is not None, text
        np.testing.assert_allclose(v, minilm.encode([text])[0], atol=1e-5)
        np.testing.assert_allclose(s.astype(np.float32), ref.states, atol=2e-3)
    assert store.lookup(["A sentence nobody ingested."]) == [None]

    count = _rows(storage, "acme")
    ingest_texts(storage, "acme", [("copy.md", HANDBOOK + "\n\nOne more line.")], minilm)
    assert count < _rows(storage, "acme") <= count + 3  # stored once: only the new sentences

    # another tenant's sentences are not acme's, nor acme's theirs
    ingest_texts(storage, "globex", [("faq.md", FAQ)], minilm)
    assert _index(storage, "globex", minilm).sentences.lookup(wanted[:1]) == [None]  # type: ignore[union-attr]
    assert _index(storage, "acme", minilm).sentences.lookup(chunk_sentences(FAQ)[:1]) == [None]  # type: ignore[union-attr]


def test_without_token_states_and_rolled_back(
    storage: PostgresStorage, minilm: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDPROXY_TOKEN_STATES", "0")
    ingest_texts(storage, "acme", [("faq.md", FAQ)], minilm)
    store = _index(storage, "acme", minilm).sentences
    assert store is not None
    texts = chunk_sentences(FAQ)
    assert all(v is not None for v in store.lookup(texts))
    assert store.token_states(texts) == [None] * len(texts)  # embedded live when asked
    # switched on again, an ingest that meets those sentences gives them their states
    monkeypatch.setenv("GROUNDPROXY_TOKEN_STATES", "1")
    count = _rows(storage, "acme")
    ingest_texts(storage, "acme", [("faq-again.md", FAQ)], minilm)
    assert _rows(storage, "acme") == count  # replaced, not duplicated
    states = store.token_states(texts)
    for s, ref in zip(states, minilm.token_states(texts), strict=True):
        assert s is not None
        np.testing.assert_allclose(s.astype(np.float32), ref.states, atol=2e-3)
    before = _rows(storage, "acme")
    with PgIndexWriter(storage.pool, "acme", minilm) as writer:
        writer.upsert("handbook.md", HANDBOOK)
        writer._flush()  # chunks and sentences written inside the open transaction
        assert _rows(storage, "acme") == before  # not visible to other connections
    assert _rows(storage, "acme") == before  # left without commit: rolled back


def test_the_hashing_embedder_stores_none(storage: PostgresStorage) -> None:
    emb = load_embedder(HASHING)
    ingest_texts(storage, "acme", [("faq.md", FAQ)], emb)
    assert storage.indexes(emb).refresh("acme").sentences is None  # type: ignore[attr-defined]
    assert _rows(storage, "acme") == 0
