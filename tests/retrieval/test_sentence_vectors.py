"""Evidence-sentence vectors stored at ingest (retrieval.sentence_vectors): the verifier
finds every evidence sentence the real guard path hands it, and its features with the
stored vectors equal the live ones."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundproxy.guards.claims.decompose import decompose
from groundproxy.guards.pipeline import gather_evidence
from groundproxy.guards.types import Embedder, Pair
from groundproxy.models.embedhead_verifier import EmbedHeadVerifier
from groundproxy.models.features import clip_claim, evidence_candidates, featurize
from groundproxy.policies.schema import local_policy
from groundproxy.retrieval.ingest import delete_documents, ingest_texts
from groundproxy.retrieval.sentence_vectors import FILES, StoredSentenceVectors
from groundproxy.retrieval.tenant_index import TenantIndex
from groundproxy.retrieval.vector_lru import VectorLRU

DOCS = [
    (
        "handbook",
        "The warranty on all company laptops lasts 12 months from the date of purchase. "
        "Employees may work remotely two days per week.\n\nTrain tickets are reimbursed in "
        "second class only. Hotel costs are capped at 150 euros per night. Dr. Smith "
        "approves travel over 2,000 euros. Is a taxi covered? Only after 10 pm.",
    ),
    (
        "faq",
        "Our support desk is open from 9 am to 5 pm on weekdays. Password resets are "
        "handled through the IT service portal. The portal is at it.example.com.",
    ),
]
ANSWER = (
    "The laptop warranty lasts 24 months. Hotel costs are capped at 150 euros per night. "
    "The support desk is open on weekdays. Password resets go through the IT portal."
)


def _pairs(index: TenantIndex, minilm: Embedder) -> list[Pair]:
    claims = decompose(ANSWER)
    policy = local_policy("t")
    evidence = gather_evidence(claims, [], policy, minilm, index, None)
    return [
        Pair(c.text, e.text, None, vectors=e.sentences)
        for c, ev in zip(claims, evidence, strict=True)
        for e in ev
    ]


def test_every_evidence_sentence_is_stored_and_features_match_live(
    tmp_path: Path, minilm: Embedder
) -> None:
    ingest_texts(tmp_path, "t", DOCS, minilm)
    index = TenantIndex.open(tmp_path, "t", embedder=minilm)
    store = index.sentences
    assert store is not None and store.embedder == minilm.name and store.count > 0
    pairs = _pairs(index, minilm)
    assert pairs and all(p.vectors is store for p in pairs)
    wanted = [s for p in pairs for s in evidence_candidates(clip_claim(p.claim), p.evidence)[0]]
    assert wanted and all(v is not None for v in store.lookup(wanted))
    assert store.lookup(["A sentence nobody ingested."]) == [None]

    live_calls: list[list[str]] = []

    def live(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        live_calls.append(list(texts))
        return minilm.encode(list(texts))

    verifier = EmbedHeadVerifier("int8", embedder=minilm)
    stored = verifier.features(pairs)
    reference = featurize([(p.claim, p.evidence) for p in pairs], live)
    np.testing.assert_allclose(stored, reference, rtol=1e-4, atol=1e-5)
    # the live path embedded the evidence sentences too; the stored path only the claims
    assert set(wanted) <= set(live_calls[0])
    assert verifier.probabilities(stored).argmax(1).tolist() == (
        verifier.probabilities(reference).argmax(1).tolist()
    )


def test_generations_carry_the_vectors_and_other_embedders_get_none(
    tmp_path: Path, minilm: Embedder, hashing: Embedder
) -> None:
    ingest_texts(tmp_path, "t", DOCS[:1], minilm)
    first = TenantIndex.open(tmp_path, "t").sentences
    assert first is not None
    ingest_texts(tmp_path, "t", DOCS[1:], minilm)
    delete_documents(tmp_path, "t", ["handbook"])  # a delete-only writer keeps them too
    index = TenantIndex.open(tmp_path, "t")
    gen = tmp_path / "t" / str(index.generation)
    assert all((gen / name).is_file() for name in FILES)
    later = StoredSentenceVectors.load(gen)
    assert later is not None and later.count > first.count
    old = "Hotel costs are capped at 150 euros per night."
    new = "Password resets are handled through the IT service portal."
    got = later.lookup([old, new])
    assert got[0] is not None and got[1] is not None
    np.testing.assert_allclose(got[1], minilm.encode([new])[0], atol=1e-5)

    ingest_texts(tmp_path, "h", DOCS, hashing)
    hashed = TenantIndex.open(tmp_path, "h")
    assert hashed.sentences is None
    assert not (tmp_path / "h" / str(hashed.generation) / FILES[0]).exists()


def test_vector_lru_embeds_only_misses_in_one_call() -> None:
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> npt.NDArray[np.float32]:
        calls.append(texts)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    lru = VectorLRU(size=2)
    first = lru.encode(["a", "bb", "a"], 2, embed)
    assert calls == [["a", "bb"]] and first[:, 0].tolist() == [1.0, 2.0, 1.0]
    second = lru.encode(["bb", "ccc"], 2, embed)
    assert calls[-1] == ["ccc"] and second[:, 0].tolist() == [2.0, 3.0]
    assert len(lru) == 2 and lru.hits == 1
    lru.encode(["a"], 2, embed)  # evicted (size 2): embedded again
    assert calls[-1] == ["a"]
