"""The ``embedhead`` verifier: a small head on frozen all-MiniLM-L6-v2 embeddings.

For each (claim, evidence) pair the evidence is cut into sentences, the best candidates
are embedded together with the claim (ONE embedder call per batch), and an ONNX network
over ``[u, v, |u−v|, u·v, similarity / overlap / number / entity features]``
(:mod:`models.features`) gives P(supported), P(contradicted), P(unverifiable).

The model files live in ``models/embedhead/`` (trained by ``training/``; see its
``MODEL_CARD.md``); their sha256 checksums in ``meta.json`` are verified at load.
Nothing heavy happens at import: onnxruntime loads in the constructor. The embedder is
injected (the registry passes the configured one when it gives the backbone's vectors,
see :func:`fits`; models.registry).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import Embedder, Pair, Probs
from groundproxy.models.features import N_FEATURES, featurize
from groundproxy.models.ranker_file import read_ranker
from groundproxy.models.stored_encode import stored_first, stores_of
from groundproxy.retrieval.embedder import MINILM_DIM, MINILM_NAME

MODEL_DIR = Path(__file__).resolve().parent / "embedhead"
# the frozen backbone the head was trained on (retrieval.embedder's ``minilm``; the torch
# and ONNX fp32 builds share this name because they give the same vectors)
EMBEDDER_NAME, EMBEDDER_DIM = MINILM_NAME, MINILM_DIM
Variant = Literal["int8", "fp32"]


def load_meta(model_dir: Path) -> dict[str, Any]:
    try:
        meta: dict[str, Any] = json.loads((model_dir / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"embedhead: cannot read {model_dir / 'meta.json'}: {exc}") from exc
    return meta


def verified_model_bytes(model_dir: Path, variant: Variant, meta: dict[str, Any]) -> bytes:
    """The ONNX file of ``variant``, after checking its sha256 against ``meta.json``."""
    try:
        filename = str(meta["files"][variant])
        expected = str(meta["sha256"][filename])
    except (KeyError, TypeError) as exc:
        raise ModelLoadError(f"embedhead: meta.json has no {variant} model entry") from exc
    path = model_dir / filename
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelLoadError(f"embedhead: cannot read {path}: {exc}") from exc
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        raise ModelLoadError(
            f"embedhead: checksum mismatch for {path} (sha256 {got[:12]}…, expected "
            f"{expected[:12]}…); the model file is corrupt or was replaced"
        )
    return data


def fits(embedder: Embedder) -> bool:
    """Does ``embedder`` give the vectors the head was trained on (same name, same size)?"""
    return embedder.name == EMBEDDER_NAME and embedder.dim == EMBEDDER_DIM


class EmbedHeadVerifier:
    """Three-label verifier; ``score`` is batched (one embed call, one ONNX run)."""

    def __init__(
        self,
        variant: Variant = "int8",
        *,
        embedder: Embedder,
        model_dir: Path = MODEL_DIR,
        threads: int = 2,
    ) -> None:
        self.meta = load_meta(model_dir)
        self.variant = variant
        self.name = "embedhead" if variant == "int8" else "embedhead-fp32"
        self.threshold = float(self.meta.get("threshold", 0.5))
        # the bar P(contradicted) must reach for the guard to call a claim contradicted on
        # the model's word alone (training/contradiction.py; guards.verdict.decide)
        self.contradiction_min = float(self.meta.get("contradiction_min", 0.5))
        # how likely each verdict is wrong (ClaimResult.uncertainty; guards.verdict.uncertainty)
        self.error_ranker = read_ranker(model_dir)
        if int(self.meta.get("n_features", -1)) != N_FEATURES:
            raise ModelLoadError(
                f"embedhead: the model expects {self.meta.get('n_features')} features, "
                f"this code builds {N_FEATURES}"
            )
        data = verified_model_bytes(model_dir, variant, self.meta)
        try:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelLoadError(f"embedhead: cannot load the ONNX model: {exc}") from exc
        if not fits(embedder):
            raise ModelLoadError(
                f"embedhead: it was trained on {EMBEDDER_NAME} vectors ({EMBEDDER_DIM}-d); "
                f"the embedder given is {embedder.name} ({embedder.dim}-d)"
            )
        self._embedder = embedder
        self._lock = threading.Lock()

    def features(self, pairs: Sequence[Pair]) -> npt.NDArray[np.float32]:
        """Feature rows; evidence sentences the index stored at ingest are not embedded
        again (models.stored_encode), the rest go to the embedder in one call."""
        encode = stored_first(self._embedder.encode, stores_of(pairs, EMBEDDER_NAME))
        return featurize([(p.claim, p.evidence) for p in pairs], encode)

    def probabilities(self, features: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        if len(features) == 0:
            return np.zeros((0, 3), dtype=np.float32)
        with self._lock:
            if self.variant == "int8":
                # dynamic int8 quantizes activations with one scale per input tensor, so a
                # row's result would depend on its batch mates: run row by row (the head
                # costs microseconds; the embedding pass stays batched)
                out = np.concatenate(
                    [
                        self._session.run(["probs"], {"features": features[i : i + 1]})[0]
                        for i in range(len(features))
                    ]
                )
            else:
                out = self._session.run(["probs"], {"features": features})[0]
        probs = np.asarray(out, dtype=np.float64)
        probs = probs / probs.sum(axis=1, keepdims=True)
        result: npt.NDArray[np.float32] = probs.astype(np.float32)
        return result

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        if not pairs:
            return []
        probs = self.probabilities(self.features(pairs)).astype(np.float64)
        return [Probs(float(s), float(c), float(1.0 - s - c)) for s, c, _ in probs]
