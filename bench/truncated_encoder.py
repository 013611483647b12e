"""Probe: could a layer-truncated all-MiniLM-L6-v2 embed claims for the full model's index?

The guard's claim embedding (MiniLM fp32) is most of a guarded answer's time; cutting the
network after L of its 6 layers costs ~L/6 of it. The pooled output of layer L is mapped into
the full model's vector space by a ridge-regression linear map fitted on ``--train-n``
sentences of ``../shared/data/train`` (seeded sample), then compared, on the claims of the
bench's distinct answers (bench.answers), with the full vectors: cosine, and the evidence the
tenant index returns (top-k overlap, top-1 agreement) — the ~300-document index of
``bench.guard_stages --data DIR`` (built there on its first run).

    nice -n 5 .venv/bin/python -m bench.truncated_encoder --data DIR [--train-n 6000]

Measurement only (needs torch + transformers, as the ONNX export does); nothing at run time
uses it.
"""

from __future__ import annotations

import argparse
import glob
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.answers import distinct_answers
from bench.guard_latency import _docs
from bench.needs_data import SHARED, require
from groundproxy.guards.claims.decompose import decompose
from groundproxy.guards.pipeline import search_text
from groundproxy.policies.schema import local_policy
from groundproxy.retrieval.index_snapshot import TenantIndex
from groundproxy.retrieval.minilm import model_path
from groundproxy.retrieval.onnx_embedder import OnnxEmbedder

LAYERS = (1, 2, 3, 4, 6)
F32 = npt.NDArray[np.float32]


def _sentences(n: int, seed: int) -> list[str]:
    found: list[str] = []
    for f in sorted(glob.glob(str(require(SHARED / "train") / "*.jsonl"))):
        for line in Path(f).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            for key in ("response", "answer", "claim", "output"):
                v = row.get(key)
                if isinstance(v, str) and 3 < len(v.split()) < 60:
                    found.append(v)
    random.Random(seed).shuffle(found)
    return found[:n]


def _pooled(tok: Any, model: Any, texts: list[str]) -> dict[int, F32]:
    import torch

    outs: dict[int, list[F32]] = {layer: [] for layer in LAYERS}
    for i in range(0, len(texts), 64):
        b = tok(texts[i : i + 64], padding=True, truncation=True, max_length=256,
                return_tensors="pt")  # fmt: skip
        with torch.no_grad():
            hidden = model(**b, output_hidden_states=True).hidden_states
        mask = b["attention_mask"].unsqueeze(-1).float()
        for layer in LAYERS:
            outs[layer].append(((hidden[layer] * mask).sum(1) / mask.sum(1)).numpy())
    return {layer: np.concatenate(v).astype(np.float32) for layer, v in outs.items()}


def _unit(x: F32) -> F32:
    out: F32 = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--train-n", type=int, default=6000)
    ap.add_argument("--answers", type=int, default=60)
    a = ap.parse_args()
    require(SHARED / "train")
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(2)
    src = model_path()
    tok = AutoTokenizer.from_pretrained(str(src))  # type: ignore[no-untyped-call]
    model = AutoModel.from_pretrained(str(src)).eval()
    train = _sentences(a.train_n, seed=7)
    x = _pooled(tok, model, train)
    target = _unit(x[6])
    maps = {}
    for layer in LAYERS[:-1]:
        design = np.hstack([x[layer], np.ones((len(train), 1), np.float32)])
        gram = design.T @ design + 1e-2 * np.eye(design.shape[1])
        maps[layer] = np.linalg.solve(gram, design.T @ target)
    embedder = OnnxEmbedder("fp32")
    index = TenantIndex.open(a.data, "bench", embedder=embedder)
    policy = local_policy("bench")
    claims = [
        search_text(c.text, ans.question)
        for ans in distinct_answers(_docs(300), a.answers)
        for c in decompose(ans.text)
    ]
    full = embedder.encode(claims)
    reference = index.search(full, policy.retrieval.top_k, policy.retrieval.min_score)
    pooled = _pooled(tok, model, claims)
    print(f"{len(train)} train sentences for the maps; {len(claims)} bench claims")
    print("| layers kept | cosine to full, mean | min | evidence top-k overlap | top-1 same |")
    print("|---|---|---|---|---|")
    for layer in LAYERS[:-1]:
        design = np.hstack([pooled[layer], np.ones((len(claims), 1), np.float32)])
        vectors = _unit((design @ maps[layer]).astype(np.float32))
        cos = (vectors * full).sum(1)
        found = index.search(vectors, policy.retrieval.top_k, policy.retrieval.min_score)
        overlap, same = [], []
        for ref, got in zip(reference, found, strict=True):
            want = {(e.doc, e.span) for e in ref}
            if want:
                overlap.append(len(want & {(e.doc, e.span) for e in got}) / len(want))
            if ref and got:
                same.append((ref[0].doc, ref[0].span) == (got[0].doc, got[0].span))
        print(f"| {layer} of 6 | {cos.mean():.3f} | {cos.min():.3f} | {np.mean(overlap):.3f} "
              f"| {np.mean(same):.3f} |")  # fmt: skip


if __name__ == "__main__":
    main()
