"""groundproxy.testing's fakes: one per backend protocol, each typed as the protocol (mypy
checks the assignments below) and each behaving as the real backend where a test relies on
it — the vector index against hnswlib, the storage through the real guard wiring."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from groundproxy.errors import GuardError, ModelLoadError, PolicyError
from groundproxy.guards.pipeline import Backends, run_guard
from groundproxy.guards.types import Embedder, Pair, Probs, Verifier
from groundproxy.policies.schema import local_policy
from groundproxy.proxy.serving.clock import Clock
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import Storage
from groundproxy.proxy.storage.feedback import Labelled
from groundproxy.proxy.upstream.types import Upstream
from groundproxy.retrieval.embedder import available_embedders, load_embedder
from groundproxy.retrieval.vector_index import HnswVectorIndex, VectorIndex
from groundproxy.testing.clock import FakeClock
from groundproxy.testing.embedders import HASHING, HashingEmbedder
from groundproxy.testing.fake_upstream_client import FakeUpstream
from groundproxy.testing.storage import MemoryStorage
from groundproxy.testing.vector_index import MemoryVectorIndex
from groundproxy.testing.verifiers import CONTRADICTED, SUPPORTED, ScriptedVerifier

ANSWER = "The warranty lasts 24 months. Returns are accepted within 30 days."
CONTEXT = [("system", "The warranty lasts 12 months. Returns are accepted within 30 days.")]


def test_every_fake_is_its_protocol() -> None:
    verifier: Verifier = ScriptedVerifier()
    embedder: Embedder = HashingEmbedder()
    index: VectorIndex = MemoryVectorIndex(8)
    storage: Storage = MemoryStorage()
    upstream: Upstream = FakeUpstream()
    clock: Clock = FakeClock(step=0.5)
    assert clock.monotonic() + 0.5 == clock.monotonic()
    assert isinstance(verifier, Verifier)  # the one runtime-checkable protocol
    assert {embedder.name, storage.name, index.dim} == {"hashing-384", "memory", 8}
    assert isinstance(upstream, FakeUpstream)


def test_the_scripted_verifier_decides_through_the_real_guard() -> None:
    def probs(pair: Pair) -> Probs:
        return CONTRADICTED if "24 months" in pair.claim else SUPPORTED

    verifier = ScriptedVerifier(probs)
    report = run_guard(
        ANSWER,
        question=None,
        context_messages=CONTEXT,
        policy=local_policy("t"),
        backends=Backends(verifier),
    )
    assert [c.verdict for c in report.claims] == ["contradicted", "supported"]
    assert verifier.batches and sum(verifier.batches) >= 2
    broken = ScriptedVerifier(error=RuntimeError("backend down"))
    with pytest.raises(GuardError, match="backend down"):
        run_guard(
            ANSWER,
            question=None,
            context_messages=CONTEXT,
            policy=local_policy("t"),
            backends=Backends(broken),
        )


def test_the_hashing_embedder_is_chosen_by_import_path_only() -> None:
    assert "hashing" not in available_embedders()  # no test double among the runtime's names
    loaded = load_embedder(HASHING)
    assert isinstance(loaded, HashingEmbedder) and load_embedder(HASHING) is loaded
    vectors = loaded.encode(["the warranty lasts", "the warranty lasts"])
    np.testing.assert_array_equal(vectors[0], vectors[1])
    with pytest.raises(ModelLoadError, match="unknown embedder 'hashing'"):
        load_embedder("hashing")
    with pytest.raises(ModelLoadError, match="cannot import embedder"):
        load_embedder("groundproxy.testing.embedders:NoSuchEmbedder")


def test_the_memory_index_agrees_with_hnswlib(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(60, 16)).astype(np.float32)
    queries = rng.normal(size=(5, 16)).astype(np.float32)
    fake, real = MemoryVectorIndex(16), HnswVectorIndex(16)
    for index in (fake, real):
        index.add(list(range(60)), vectors)
        index.mark_deleted(3)
    got = [index.query(queries, 5) for index in (fake, real)]
    np.testing.assert_array_equal(got[0][0], got[1][0])  # 60 vectors: hnswlib is exact
    np.testing.assert_allclose(got[0][1], got[1][1], atol=1e-5)
    assert 3 not in got[0][0] and (fake.count, fake.deleted_count) == (59, 1)
    fake.save(tmp_path / "index.npz")
    again = MemoryVectorIndex.load(tmp_path / "index.npz", 16)
    np.testing.assert_array_equal(again.query(queries, 5)[0], got[0][0])
    assert again.query(queries[:1], 100)[0].shape == (1, 59)


def test_the_memory_storage_serves_the_guard(tmp_path: Path) -> None:
    storage = MemoryStorage(tmp_path)
    policy = local_policy("acme", verifier={"model": "lexical", "threshold": "calibrated"})
    settings = Settings(data=tmp_path, batch_window_ms=0)
    with build_guard(settings, embedder=HashingEmbedder(), storage=storage) as guard:
        with pytest.raises(PolicyError, match="no calibration"):
            guard.verify_sync(ANSWER, None, CONTEXT, policy, index=None)
        storage.write_calibration("acme", {"threshold": 0.7, "verifier": "lexical"})
        assert guard.verify_sync(ANSWER, None, CONTEXT, policy, index=None).threshold == 0.7


def test_the_memory_storage_keeps_labels_and_adapter_versions() -> None:
    storage = MemoryStorage()
    stored, count = storage.append_feedback("acme", Labelled("It lasts 2 years.", 1))
    assert count == 1 and stored.id.startswith("fb-") and stored.created > 0
    assert storage.read_feedback("acme") == [stored] and storage.read_feedback("other") == []
    with pytest.raises(PolicyError):
        storage.write_adapter("acme", {"features": ["nope"]})
    adapter = {"verifier": "lexical", "features": ["mean_lex_claim"], "mean": [0.5],
               "scale": [0.2], "coef": [-1.0], "intercept": 0.0, "threshold": 0.5}  # fmt: skip
    assert storage.write_adapter("acme", adapter)[0] == 1
    assert storage.write_adapter("acme", {**adapter, "threshold": 0.6})[0] == 2
    cache = storage.adapters()
    found = cache.get("acme")
    assert found is not None and (found.version, found.threshold) == (2, 0.6)
    assert cache.get("other") is None
    with pytest.raises(PolicyError, match="fitted on verifier 'lexical'"):
        cache.for_verifier("acme", "embedhead")
