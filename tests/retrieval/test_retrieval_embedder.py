from __future__ import annotations

import numpy as np
import pytest

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.embedder import load_embedder, model_path


def test_model_path_is_packaged() -> None:
    path = model_path()
    assert (path / "model.safetensors").is_file()
    assert "site-packages" in str(path) or "dist-packages" in str(path)


def test_minilm_vectors_are_normalized(minilm: Embedder) -> None:
    assert minilm.dim == 384 and minilm.name == "all-MiniLM-L6-v2"
    vectors = minilm.encode(["The warranty lasts 12 months.", "ok", "ünïcödé text 東京"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_minilm_paraphrase_beats_unrelated(minilm: Embedder) -> None:
    a, paraphrase, unrelated = minilm.encode(
        [
            "The warranty lasts twelve months.",
            "The guarantee is valid for one year.",
            "Penguins live in the southern hemisphere.",
        ]
    )
    assert float(a @ paraphrase) > float(a @ unrelated) + 0.2


def test_empty_input(minilm: Embedder) -> None:
    out = minilm.encode([])
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_load_embedder_is_shared_and_checks_names(minilm: Embedder) -> None:
    assert load_embedder("minilm") is minilm
    with pytest.raises(ModelLoadError, match="minilm"):
        load_embedder("bert-large")


def test_hashing_embedder_is_deterministic(hashing: Embedder) -> None:
    a = hashing.encode(["same words here", "other"])
    b = hashing.encode(["same words here", "other"])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
