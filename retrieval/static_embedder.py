"""Static token vectors distilled from all-MiniLM-L6-v2: a text's vector is a table look-up.

Built by ``training/static_distill.py`` (the Model2Vec method: one MiniLM forward pass
over the vocabulary, PCA, SIF weights from TRAIN text; int8 rows) into ``models/static/``
(``vectors.npz`` + ``meta.json``, checksummed at load). Encoding: MiniLM's own tokenizer
(the packaged ``tokenizer.json``, no special tokens), the mean of the pieces' rows, L2
normalized — ~20 µs per sentence instead of ~10 ms, and no model session.

Its vectors are NOT MiniLM's (another space, 128-d), so it could only ever replace a
*ranking*, never an index's vectors or the verifier's features. An experiment, not wired
into serving: ``bench/static_encoder.py`` measures how its rankings of request-context
evidence agree with MiniLM's (and BM25's, what the pre-selection uses); README, "Request
context at index speed", has the figures and why it is not used.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.errors import ModelLoadError
from groundproxy.retrieval.minilm import model_path

STATIC_DIR = Path(__file__).resolve().parent.parent / "models" / "static"


class StaticEmbedder:
    """Unit vectors from the distilled table (see the module docstring); thread-safe."""

    def __init__(self, folder: Path = STATIC_DIR, source: Path | None = None) -> None:
        try:
            meta: dict[str, Any] = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            data = (folder / "vectors.npz").read_bytes()
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"static embedder: cannot read {folder}: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            raise ModelLoadError(f"static embedder: {folder / 'vectors.npz'} fails its checksum")
        import io

        with np.load(io.BytesIO(data)) as z:
            table = z["rows"].astype(np.float32) * z["scales"][:, None]
        self._table: npt.NDArray[np.float32] = table
        self.name = str(meta.get("name", "minilm-static"))
        self.dim = int(table.shape[1])
        tokenizers = importlib.import_module("tokenizers")  # untyped: kept as Any
        self._tokenizer: Any = tokenizers.Tokenizer.from_file(
            str((source or model_path()) / "tokenizer.json")
        )
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """(n, dim) float32 unit vectors (zero for a text without word pieces)."""
        items = list(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        for i, enc in enumerate(self._tokenizer.encode_batch(items, add_special_tokens=False)):
            if enc.ids:
                v = self._table[enc.ids].sum(axis=0)
                norm = float(np.linalg.norm(v))
                if norm > 0:
                    out[i] = v / norm
        return out
