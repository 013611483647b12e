"""all-MiniLM-L6-v2 on a GPU (torch + transformers on CUDA): ingest of large corpora.

On 2 CPU cores ingest is bound by the network itself (~90 % of its time in the ONNX run,
each ~600-character chunk embedded once and its evidence sentences once more, with their
token states). ``GROUNDPROXY_EMBEDDER=minilm-cuda groundproxy ingest …`` embeds on the GPU
instead: the packaged model's own weights (no download), the same tokenizer, truncation
(256), mean pooling and L2 normalization as the ONNX embedder, batches of
:data:`BATCH` texts of similar length, fp32 (``GROUNDPROXY_CUDA_FP16=1``: half precision).
Its vectors match the CPU ones to cosine ≥ 0.999 (``bench/ingest_gpu.sh`` checks it on the
device), so it keeps MiniLM's name and writes the same indexes, sentence vectors and token
states; the server keeps reading them on the CPU.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.errors import ModelLoadError
from groundproxy.retrieval.minilm import MINILM_DIM, MINILM_NAME, model_path
from groundproxy.retrieval.onnx_embedder import length_groups, max_seq_length
from groundproxy.retrieval.token_states import TokenStates, unit_states

BATCH = 256


class TorchMiniLM:
    """MiniLM on ``device`` (``cuda`` by default); thread-safe enough for one writer."""

    def __init__(self, device: str = "cuda", *, source: Path | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        src = source or model_path()
        try:
            import torch
            from transformers import AutoModel

            if device.startswith("cuda") and not torch.cuda.is_available():
                raise ModelLoadError("embedder minilm-cuda: no CUDA device is available")
            half = os.environ.get("GROUNDPROXY_CUDA_FP16", "") == "1"
            model = AutoModel.from_pretrained(str(src), local_files_only=True)
            model = model.to(device=device, dtype=torch.float16 if half else torch.float32)
            self._model: Any = model.eval()
            tokenizers = importlib.import_module("tokenizers")
            self._tokenizer: Any = tokenizers.Tokenizer.from_file(str(src / "tokenizer.json"))
        except ModelLoadError:
            raise
        except Exception as exc:  # any failure to load torch, CUDA or the model
            raise ModelLoadError(f"cannot load MiniLM on {device}: {exc}") from exc
        self._torch: Any = torch
        self._device = device
        self._tokenizer.enable_truncation(max_length=max_seq_length(src))
        self._tokenizer.no_padding()
        self.name = MINILM_NAME
        self.dim = MINILM_DIM

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._run(list(texts), None)

    def encode_with_states(
        self, texts: Sequence[str]
    ) -> tuple[npt.NDArray[np.float32], list[TokenStates]]:
        """Vectors and token states from one pass (ingest stores both)."""
        items = list(texts)
        states: dict[int, TokenStates] = {}
        vectors = self._run(items, states)
        return vectors, [states[i] for i in range(len(items))]

    def _run(
        self, items: list[str], states: dict[int, TokenStates] | None
    ) -> npt.NDArray[np.float32]:
        torch = self._torch
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        encs = self._tokenizer.encode_batch(items)
        for group in length_groups([len(e.ids) for e in encs], BATCH):
            width = max(len(encs[i].ids) for i in group)
            ids = np.zeros((len(group), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(group):
                ids[row, : len(encs[i].ids)] = encs[i].ids
                mask[row, : len(encs[i].ids)] = 1
            with torch.inference_mode():
                t_ids = torch.from_numpy(ids).to(self._device)
                t_mask = torch.from_numpy(mask).to(self._device)
                hidden = self._model(
                    input_ids=t_ids, attention_mask=t_mask, token_type_ids=torch.zeros_like(t_ids)
                ).last_hidden_state.float()
                m = t_mask.unsqueeze(-1).float()
                pooled = (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)
                unit = torch.nn.functional.normalize(pooled, dim=1)
                out[group] = unit.cpu().numpy()
                if states is not None:
                    hidden_np = hidden.cpu().numpy()
            if states is not None:
                for row, i in enumerate(group):
                    n = len(encs[i].ids)
                    states[i] = TokenStates(
                        tuple(encs[i].tokens[1:-1]), unit_states(hidden_np[row], n - 2)
                    )
        return out
