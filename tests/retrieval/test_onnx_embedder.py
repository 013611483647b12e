"""The ONNX embedder: parity with torch (real model), the export cache, and index mixing."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from groundproxy.errors import IndexStoreError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval import onnx_embedder
from groundproxy.retrieval.embedder import load_embedder, model_path
from groundproxy.retrieval.ingest import ingest_texts
from groundproxy.retrieval.onnx_embedder import OnnxEmbedder, ensure_exported
from groundproxy.retrieval.tenant_index import TenantIndex

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

SENTENCES = [
    "The warranty lasts 12 months from the date of purchase.",
    "ok",
    "ünïcödé text 東京 with accents: café, naïve.",
    "Hotel costs are capped at 150 euros per night. " * 40,  # past 256 tokens: truncated
    "Password resets are handled through the IT service portal.",
]


@pytest.fixture(scope="module")
def torch_minilm() -> Embedder:
    return load_embedder("minilm-torch")


@pytest.fixture(scope="module")
def int8() -> Embedder:
    return load_embedder("minilm-int8")


def test_default_minilm_is_onnx_and_matches_torch(minilm: Embedder, torch_minilm: Embedder) -> None:
    assert isinstance(minilm, OnnxEmbedder) and minilm.variant == "fp32"
    assert minilm.name == torch_minilm.name == "all-MiniLM-L6-v2"
    assert minilm.max_seq_length == 256
    a, b = minilm.encode(SENTENCES), torch_minilm.encode(SENTENCES)
    assert a.shape == b.shape == (len(SENTENCES), 384) and a.dtype == np.float32
    cos = (a * b).sum(axis=1)
    assert cos.min() >= 0.9999, cos
    # Batching and ordering do not change a text's vector.
    one = np.stack([minilm.encode([s])[0] for s in SENTENCES])
    np.testing.assert_allclose(one, a, atol=1e-4)


def test_length_groups_bound_padding_and_cover_every_text() -> None:
    lengths = [5, 140, 6, 7, 30, 31, 33, 256, 256, 256, 12]
    groups = onnx_embedder.length_groups(lengths, batch_size=2)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert all(1 <= len(g) <= 2 for g in groups)
    for g in groups:
        pad = sum(max(lengths[i] for i in g) - lengths[i] for i in g)
        real = sum(lengths[i] for i in g)
        assert pad <= max(onnx_embedder.RUN_COST_TOKENS, onnx_embedder.PAD_SHARE * real)
    # the long claim is never padded onto the short ones (the old pad-to-longest cost)
    assert [1] in onnx_embedder.length_groups(lengths, batch_size=64)


def test_concurrent_mixed_length_encodes_match_one_by_one(minilm: Embedder) -> None:
    texts = [s * (i % 3 + 1) for i, s in enumerate(SENTENCES * 3)]
    alone = np.stack([minilm.encode([t])[0] for t in texts])
    results: list[np.ndarray] = []
    lock = threading.Lock()

    def work() -> None:
        got = minilm.encode(list(reversed(texts)))[::-1]
        with lock:
            results.append(got)

    if isinstance(minilm, OnnxEmbedder):
        minilm.lru.clear()  # really run the model, from four threads at once
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for got in results:
        np.testing.assert_allclose(got, alone, atol=1e-4)


def test_int8_is_close_but_named_apart(int8: Embedder, torch_minilm: Embedder) -> None:
    assert int8.name == "all-MiniLM-L6-v2-int8" and int8.dim == 384
    a, b = int8.encode(SENTENCES), torch_minilm.encode(SENTENCES)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-4)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.9, cos  # close, yet measurably different: hence its own name
    assert cos.min() < 0.9999


def test_indexes_of_int8_and_fp32_never_mix(
    tmp_path: Path, minilm: Embedder, int8: Embedder
) -> None:
    ingest_texts(tmp_path, "t", [("doc", "The warranty lasts 12 months.")], int8)
    with pytest.raises(IndexStoreError, match="all-MiniLM-L6-v2-int8"):
        TenantIndex.open(tmp_path, "t", embedder=minilm)
    with pytest.raises(IndexStoreError, match="cannot add"):
        ingest_texts(tmp_path, "t", [("doc2", "Another document.")], minilm)
    assert TenantIndex.open(tmp_path, "t", embedder=int8).count == 1


def test_export_is_cached_verified_and_rebuilt_when_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm: Embedder
) -> None:
    first = ensure_exported("fp32", root=tmp_path)  # the real export, from the installed package
    assert first.is_relative_to(tmp_path / "embedder") and first.stat().st_size > 50_000_000
    assert [p.name for p in (tmp_path / "embedder").iterdir() if not p.name.endswith(".lock")] == [
        first.parent.name
    ]  # no temporary folder left behind
    good = first.read_bytes()
    exports: list[Path] = []

    def copy_export(source: Path, out: Path, variant: onnx_embedder.Variant) -> None:
        exports.append(out)  # stands in for a second real export (slow): same bytes
        out.write_bytes(good)

    monkeypatch.setattr(onnx_embedder, "_export", copy_export)
    assert ensure_exported("fp32", root=tmp_path) == first and exports == []  # cached
    with first.open("r+b") as f:  # damage it: the checksum catches it, it is rebuilt
        f.seek(1_000_000)
        f.write(b"\0" * 64)
    again = OnnxEmbedder("fp32", cache=tmp_path)
    assert len(exports) == 1 and again.model_file == first and first.read_bytes() == good
    np.testing.assert_allclose(again.encode(SENTENCES[:2]), minilm.encode(SENTENCES[:2]), atol=1e-5)


def test_concurrent_loaders_export_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    gate = threading.Event()

    def slow_fake_export(source: Path, out: Path, variant: onnx_embedder.Variant) -> None:
        calls.append(variant)
        gate.wait(0.3)  # hold the lock long enough for the others to queue on it
        out.write_bytes(b"fake onnx " + variant.encode())

    monkeypatch.setattr(onnx_embedder, "_export", slow_fake_export)
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(ensure_exported("fp32", root=tmp_path)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert calls == ["fp32"] and len(results) == 4 and len(set(results)) == 1
    assert results[0].read_bytes() == b"fake onnx fp32"


def test_cache_key_follows_the_model_and_variant() -> None:
    src = model_path()
    assert onnx_embedder.export_key(src, "fp32") != onnx_embedder.export_key(src, "int8")
    assert onnx_embedder.export_key(src, "fp32") == onnx_embedder.export_key(src, "fp32")
