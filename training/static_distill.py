"""Static token vectors distilled from all-MiniLM-L6-v2 (the Model2Vec method, no download).

One forward pass of the packaged MiniLM (its ONNX export, retrieval.onnx_embedder) over its
whole word-piece vocabulary, each piece alone (``[CLS] piece [SEP]``, mean pooled as MiniLM
pools a sentence); PCA to ``--dims``; each row weighted by SIF ``a / (a + p(piece))`` with
``p`` the piece's frequency in ../shared/data/train texts (contexts and responses, TRAIN
only); stored int8 with one scale per row. A text's vector is then the normalized mean of
its pieces' rows (retrieval.static_embedder): a table look-up, no network.

    .venv/bin/python -m training.static_distill [--dims 128] [--out models/static]

Writes ``vectors.npz`` (``rows`` int8 (V, dims), ``scales`` float32 (V,)) and ``meta.json``
(name, dims, recipe, the tokenizer's and the vectors' sha256).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundproxy.retrieval.minilm import model_path
from groundproxy.retrieval.onnx_embedder import OnnxEmbedder

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "train"
SIF_A = 1e-3
RECIPE = "model2vec-style: [CLS] piece [SEP] mean-pooled, PCA, SIF(a=1e-3) on train, int8/row"


def piece_vectors(embedder: OnnxEmbedder, batch: int = 512) -> npt.NDArray[np.float32]:
    """MiniLM's pooled vector of every word piece alone, (V, 384)."""
    vocab = embedder._tokenizer.get_vocab_size()
    cls, sep = embedder._tokenizer.token_to_id("[CLS]"), embedder._tokenizer.token_to_id("[SEP]")
    out = np.zeros((vocab, 384), dtype=np.float32)
    for at in range(0, vocab, batch):
        ids = np.arange(at, min(at + batch, vocab), dtype=np.int64)
        seq = np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], axis=1)
        feeds = {
            "input_ids": seq,
            "attention_mask": np.ones_like(seq),
            "token_type_ids": np.zeros_like(seq),
        }
        hidden = embedder._session.run(None, feeds)[0]
        out[at : at + len(ids)] = hidden.mean(axis=1)
    return out


def piece_frequencies(embedder: OnnxEmbedder, limit: int = 40_000) -> npt.NDArray[np.float64]:
    """p(piece) over TRAIN texts (add-one smoothed)."""
    counts: Counter[int] = Counter()
    texts: list[str] = []
    for path in sorted(DATA.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines()[: limit // 10]:
            row = json.loads(line)
            texts += [str(row.get("context") or ""), str(row.get("response") or "")]
    for enc in embedder._tokenizer.encode_batch(texts, add_special_tokens=False):
        counts.update(enc.ids)
    vocab = embedder._tokenizer.get_vocab_size()
    freq = np.ones(vocab, dtype=np.float64)
    for i, n in counts.items():
        freq[i] += n
    out: npt.NDArray[np.float64] = freq / freq.sum()
    return out


def distill(dims: int) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    embedder = OnnxEmbedder("fp32", threads=2)
    began = time.perf_counter()
    raw = piece_vectors(embedder)
    print(f"forward pass over {len(raw)} pieces: {time.perf_counter() - began:.1f} s")
    centered = raw - raw.mean(axis=0)
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    reduced = centered @ vt[:dims].T
    weights = SIF_A / (SIF_A + piece_frequencies(embedder))
    table = (reduced * weights[:, None]).astype(np.float32)
    scales = np.maximum(np.abs(table).max(axis=1), 1e-12) / 127.0
    rows = np.round(table / scales[:, None]).astype(np.int8)
    return rows, scales.astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "models" / "static"
    )
    args = ap.parse_args()
    rows, scales = distill(args.dims)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "vectors.npz"
    np.savez_compressed(target, rows=rows, scales=scales)
    meta = {
        "name": f"minilm-static-{args.dims}",
        "dims": args.dims,
        "vocab": int(rows.shape[0]),
        "recipe": RECIPE,
        "tokenizer_sha256": hashlib.sha256(
            (model_path() / "tokenizer.json").read_bytes()
        ).hexdigest(),
        "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB) and meta.json")


if __name__ == "__main__":
    main()
