from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from groundproxy.errors import IndexStoreError
from groundproxy.retrieval.vector_index import HnswVectorIndex


def _unit(n: int, dim: int, seed: int) -> npt.NDArray[np.float32]:
    x = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    out: npt.NDArray[np.float32] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def test_query_finds_itself_with_similarity_one() -> None:
    vectors = _unit(50, 16, 0)
    index = HnswVectorIndex(16)
    index.add(list(range(100, 150)), vectors)
    labels, sims = index.query(vectors[:5], 3)
    assert labels.shape == (5, 3)
    assert list(labels[:, 0]) == [100, 101, 102, 103, 104]
    np.testing.assert_allclose(sims[:, 0], 1.0, atol=1e-5)
    assert np.all(np.diff(sims, axis=1) <= 1e-6)  # best first


def test_empty_index_and_k_larger_than_count() -> None:
    index = HnswVectorIndex(8)
    labels, sims = index.query(_unit(2, 8, 1), 5)
    assert labels.shape == (2, 0) and sims.shape == (2, 0)
    index.add([1, 2], _unit(2, 8, 2))
    labels, _ = index.query(_unit(1, 8, 3), 10)
    assert labels.shape == (1, 2) and set(labels[0]) == {1, 2}


def test_deleted_labels_are_hidden_and_slots_reused() -> None:
    vectors = _unit(40, 8, 4)
    index = HnswVectorIndex(8, max_elements=4)  # grows on demand
    index.add(list(range(40)), vectors)
    assert index.count == 40 and index.capacity >= 40
    for label in range(0, 40, 2):
        index.mark_deleted(label)
    assert index.count == 20 and index.deleted_count == 20
    labels, _ = index.query(vectors, 20)
    assert not {int(x) for x in labels.ravel()} & set(range(0, 40, 2))
    capacity = index.capacity
    index.add(list(range(40, 60)), _unit(20, 8, 5))
    assert index.count == 40 and index.deleted_count == 0 and index.capacity == capacity
    with pytest.raises(IndexStoreError):
        index.mark_deleted(12345)


def test_save_and_load_roundtrip(tmp_path: Path) -> None:
    vectors = _unit(30, 8, 6)
    index = HnswVectorIndex(8)
    index.add(list(range(30)), vectors)
    index.mark_deleted(3)
    index.save(tmp_path / "i.bin")
    loaded = HnswVectorIndex.load(tmp_path / "i.bin", 8, deleted=1)
    assert loaded.count == 29
    a = index.query(vectors, 5)
    b = loaded.query(vectors, 5)
    np.testing.assert_array_equal(a[0], b[0])
    with pytest.raises(IndexStoreError):
        HnswVectorIndex.load(tmp_path / "missing.bin", 8)


def test_wrong_shapes_rejected() -> None:
    index = HnswVectorIndex(8)
    with pytest.raises(IndexStoreError):
        index.add([1], _unit(1, 4, 7))
    index.add([1], _unit(1, 8, 7))
    with pytest.raises(IndexStoreError):
        index.query(_unit(1, 4, 8), 1)


def test_parallel_add_builds_the_same_searchable_index_and_reuses_deleted_slots() -> None:
    """A large add runs on several threads (hnswlib's ParallelFor), also when it fills the
    slots of deleted vectors; every vector still finds itself, as with one thread."""
    from groundproxy.retrieval.vector_index import PARALLEL_ADD_MIN

    n = PARALLEL_ADD_MIN * 4
    vectors = _unit(n, 32, 9)
    parallel = HnswVectorIndex(32, add_threads=4)
    single = HnswVectorIndex(32, add_threads=1)
    for index in (parallel, single):
        index.add(list(range(n)), vectors)
        labels, _ = index.query(vectors, 1)
        assert index.count == n
        assert (labels[:, 0] == np.arange(n)).mean() >= 0.99
    for label in range(0, n, 2):
        parallel.mark_deleted(label)
    fresh = _unit(n // 2, 32, 10)
    capacity = parallel.capacity
    parallel.add(list(range(n, n + n // 2)), fresh)  # parallel and into deleted slots
    assert parallel.count == n and parallel.deleted_count == 0 and parallel.capacity == capacity
    labels, _ = parallel.query(fresh, 1)
    assert (labels[:, 0] == np.arange(n, n + n // 2)).mean() >= 0.99
    odd, _ = parallel.query(vectors[1::2], 1)
    assert (odd[:, 0] == np.arange(1, n, 2)).mean() >= 0.99


def test_new_indexes_are_built_with_the_configured_effort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GROUNDPROXY_HNSW_M / _EF_CONSTRUCTION reach the hnswlib file a real ingest writes."""
    import hnswlib

    from groundproxy.retrieval.generations import INDEX_FILE, read_current
    from groundproxy.retrieval.ingest import ingest_texts
    from groundproxy.testing.embedders import HashingEmbedder

    def built(tenant: str) -> tuple[int, int]:
        pointer = read_current(tmp_path / tenant, tenant)
        assert pointer is not None
        index = hnswlib.Index(space="cosine", dim=HashingEmbedder().dim)
        index.load_index(str(tmp_path / tenant / pointer.generation / INDEX_FILE))
        return int(index.M), int(index.ef_construction)

    docs = [("a", "The warranty lasts 12 months."), ("b", "Returns within 30 days.")]
    ingest_texts(tmp_path, "plain", docs, HashingEmbedder())
    assert built("plain") == (16, 200)
    monkeypatch.setenv("GROUNDPROXY_HNSW_M", "8")
    monkeypatch.setenv("GROUNDPROXY_HNSW_EF_CONSTRUCTION", "64")
    ingest_texts(tmp_path, "quick", docs, HashingEmbedder())
    assert built("quick") == (8, 64)
    ingest_texts(tmp_path, "plain", [("c", "Shipping is free.")], HashingEmbedder())
    assert built("plain") == (16, 200)  # an existing index keeps what it was built with


@pytest.mark.parametrize(
    ("value", "message"),
    [("fast", "whole number"), ("5", "between 16 and 2000"), ("99999", "between 16 and 2000")],
)
def test_bad_build_settings_are_named(
    value: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundproxy.retrieval.vector_index import build_params

    monkeypatch.setenv("GROUNDPROXY_HNSW_EF_CONSTRUCTION", value)
    with pytest.raises(
        IndexStoreError, match=f"GROUNDPROXY_HNSW_EF_CONSTRUCTION must be .*{message}"
    ):
        build_params()
