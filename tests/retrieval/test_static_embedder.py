"""The static (Model2Vec-style) embedder: a checksummed table read as written, a text's
vector the normalized mean of its word pieces' rows (the experiment of issue 30, item 3)."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from groundproxy.errors import ModelLoadError
from groundproxy.retrieval.minilm import model_path
from groundproxy.retrieval.static_embedder import StaticEmbedder


def _table(folder: Path, dims: int = 8) -> np.ndarray:
    tokenizer = importlib.import_module("tokenizers").Tokenizer.from_file(
        str(model_path() / "tokenizer.json")
    )
    rng = np.random.default_rng(0)
    rows = rng.integers(-127, 128, size=(tokenizer.get_vocab_size(), dims), dtype=np.int8)
    scales = rng.uniform(0.5, 2.0, size=len(rows)).astype(np.float32)
    folder.mkdir()
    np.savez_compressed(folder / "vectors.npz", rows=rows, scales=scales)
    digest = hashlib.sha256((folder / "vectors.npz").read_bytes()).hexdigest()
    meta = {"name": "minilm-static-test", "dims": dims, "sha256": digest}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return rows.astype(np.float32) * scales[:, None]


def test_a_texts_vector_is_the_normalized_mean_of_its_pieces_rows(tmp_path: Path) -> None:
    table = _table(tmp_path / "static")
    embedder = StaticEmbedder(tmp_path / "static")
    texts = ["The warranty lasts 12 months.", "", "Paris is in France."]
    got = embedder.encode(texts)
    assert got.shape == (3, 8) and embedder.name == "minilm-static-test"
    tokenizer = embedder._tokenizer
    ids = tokenizer.encode(texts[0], add_special_tokens=False).ids
    want = table[ids].sum(axis=0)
    np.testing.assert_allclose(got[0], want / np.linalg.norm(want), rtol=1e-5, atol=1e-6)
    assert not got[1].any()  # no word pieces: the zero vector
    assert np.linalg.norm(got[2]) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_array_equal(embedder.encode(texts[:1])[0], got[0])


def test_a_damaged_table_is_refused(tmp_path: Path) -> None:
    _table(tmp_path / "static")
    with (tmp_path / "static" / "vectors.npz").open("ab") as f:
        f.write(b"x")
    with pytest.raises(ModelLoadError, match="checksum"):
        StaticEmbedder(tmp_path / "static")
    with pytest.raises(ModelLoadError, match="cannot read"):
        StaticEmbedder(tmp_path / "missing")
