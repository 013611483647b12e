"""Ingest on a GPU (``GROUNDPROXY_EMBEDDER=minilm-cuda``): one short device check.

Here, once (writes the git-ignored ``.gpu-ingest/``, ~50 MiB):

    .venv/bin/python -m bench.ingest_gpu pack [--docs 2000]

``corpus.jsonl.xz`` (``--docs`` documents of ../shared/data/train HaluEval summarization),
``reference.npz`` (the serving CPU path's vectors — ONNX MiniLM — of the first chunks and
their evidence sentences, as ingest makes them), ``minilm.tar.xz`` (the packaged
all-MiniLM-L6-v2, fp16 weights) and ``whl/`` (pure-Python wheels the device image lacks,
pinned as in requirements.lock, and hnswlib built here for CPython 3.12 without
``-march=native``), plus ``stopwords.json`` for an import-only stand-in of scikit-learn /
scipy when the device has neither (ingest never calls them; their wheels, ~45 MiB, do not
fit beside the model in the 64 MiB a run may carry).

On the device (``bench/ingest_gpu.sh``; ``carry: [".gpu-ingest"]``):

    python3 -m bench.ingest_gpu run --pack .gpu-ingest [--device cuda]

ingests the corpus through the real writer (chunk vectors, evidence-sentence vectors and
token states, hnswlib) with the GPU embedder, prints chunks/s, checks the GPU vectors of
the reference texts against the CPU ones (cosine ≥ 0.999) and that a CPU vector finds its
own chunk first in the GPU-built index; writes ``$OUT/ingest_gpu.json``; exit 1 on a failed
check. ``--device cpu`` dry-runs it here.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / ".gpu-ingest"
SOURCE = REPO.parent / "shared" / "data" / "train" / "halueval-summarization.jsonl"
REFERENCE_CHUNKS = 256
MIN_COSINE = 0.999
WHEELS = (
    "pydantic==2.14.4", "pydantic_core==2.50.5", "annotated-types==0.8.0",
    "typing-inspection==0.4.5", "pysbd==0.3.4",
)  # fmt: skip
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "vocab.txt", "sentence_bert_config.json")  # fmt: skip


def _docs(path: Path, n: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        text = json.loads(line).get("context") or ""
        if text and text not in seen:
            seen.add(text)
            out.append((f"doc-{len(out)}", text))
            if len(out) >= n:
                break
    return out


def reference_texts(docs: list[tuple[str, str]]) -> tuple[list[str], list[int]]:
    """The first chunks of the corpus and their evidence sentences, as ingest embeds them,
    and which of them are chunks."""
    from groundproxy.retrieval.chunker import iter_chunks
    from groundproxy.retrieval.sentence_vectors import chunk_sentences

    texts: list[str] = []
    chunks: list[int] = []
    for _, text in docs:
        for piece in iter_chunks(text, 600):
            chunks.append(len(texts))
            texts.append(piece.text)
            texts += chunk_sentences(piece.text)[:2]
            if len(texts) >= REFERENCE_CHUNKS:
                return texts, chunks
    return texts, chunks


def pack(n_docs: int, out: Path = PACK) -> None:
    import torch
    from safetensors.torch import load_file, save_file
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from groundproxy.retrieval.embedder import load_embedder
    from groundproxy.retrieval.minilm import model_path

    if out.exists():
        shutil.rmtree(out)
    (out / "whl").mkdir(parents=True)
    docs = _docs(SOURCE, n_docs)
    with lzma.open(out / "corpus.jsonl.xz", "wt", encoding="utf-8") as f:
        for doc_id, text in docs:
            f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    texts, chunks = reference_texts(docs)
    np.savez_compressed(out / "reference.npz", vectors=load_embedder("minilm").encode(texts))
    reference = {"texts": texts, "chunks": chunks}
    (out / "reference.json").write_text(json.dumps(reference), encoding="utf-8")
    (out / "stopwords.json").write_text(json.dumps(sorted(ENGLISH_STOP_WORDS)), "utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        minilm = Path(tmp) / "minilm"
        minilm.mkdir()
        for name in MODEL_FILES:
            if (model_path() / name).is_file():
                shutil.copy2(model_path() / name, minilm / name)
        weights = load_file(str(model_path() / "model.safetensors"))
        save_file({k: v.to(torch.float16) for k, v in weights.items()},
                  str(minilm / "model.safetensors"))  # fmt: skip
        with tarfile.open(out / "minilm.tar.xz", "w:xz", preset=6) as tar:
            tar.add(minilm, arcname="minilm")
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp",
                    "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
                    "-d", str(out / "whl"), *WHEELS], check=True)  # fmt: skip
    py312 = _python312()
    env = {**os.environ, "HNSWLIB_NO_NATIVE": "1"}  # no -march=native: any x86-64 CPU
    subprocess.run([py312, "-m", "pip", "wheel", "-q", "--no-deps", "hnswlib==0.8.0",
                    "-w", str(out / "whl")], check=True, env=env)  # fmt: skip
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: {size / 2**20:.1f} MiB, {len(docs)} documents, {len(texts)} reference texts")


def _python312() -> str:
    """A CPython 3.12 here (the device's version) to build hnswlib's wheel with."""
    for candidate in (os.environ.get("PY312"), shutil.which("python3.12"),
                      str(Path.home() / ".pyenv/versions/3.12.1/bin/python")):  # fmt: skip
        if (
            candidate
            and subprocess.run([candidate, "--version"], capture_output=True).returncode == 0
        ):
            return candidate
    raise SystemExit("a python3.12 is needed here to build hnswlib's wheel (set PY312)")


def run(pack_dir: Path, device: str, out: Path, limit: int = 0) -> int:
    from groundproxy.retrieval.torch_embedder import TorchMiniLM

    # extracted outside the pack: a dry run here must not grow what a device run carries
    # (64 MiB in all; the unpacked model alone is 45 MiB)
    unpacked = Path(tempfile.mkdtemp(prefix="gp-minilm-"))
    with tarfile.open(pack_dir / "minilm.tar.xz") as tar:
        tar.extractall(unpacked, filter="data")
    model = unpacked / "minilm"
    began = time.perf_counter()
    embedder = TorchMiniLM(device, source=model)  # transformers loads before any stand-in
    load_s = time.perf_counter() - began
    standin = os.environ.get("GP_STANDIN")
    if standin:  # scikit-learn / scipy for import only (bench/ingest_gpu.sh)
        sys.path.insert(0, standin)
    from groundproxy.retrieval.index_snapshot import TenantIndex
    from groundproxy.retrieval.ingest import ingest_texts

    with lzma.open(pack_dir / "corpus.jsonl.xz", "rt", encoding="utf-8") as f:
        docs = [(d["id"], d["text"]) for d in map(json.loads, f)]
    docs = docs[:limit] if limit > 0 else docs
    refs = json.loads((pack_dir / "reference.json").read_text(encoding="utf-8"))
    texts, chunks = refs["texts"], refs["chunks"]
    reference = np.load(pack_dir / "reference.npz")["vectors"]
    cosines = np.sum(embedder.encode(texts) * reference, axis=1)
    work = Path(tempfile.mkdtemp(prefix="gp-ingest-gpu-"))
    began = time.perf_counter()
    result = ingest_texts(work, "gpu", docs, embedder)
    ingest_s = time.perf_counter() - began
    with TenantIndex.open(work, "gpu") as index:
        chunk_rows = chunks[:50]
        hits = index.search(reference[chunk_rows], 1, -1.0)
        found = sum(
            bool(h) and h[0].text == texts[i] for i, h in zip(chunk_rows, hits, strict=True)
        )
    summary: dict[str, Any] = {
        "device": device,
        "gpu": _gpu_name(),
        "documents": len(docs),
        "chunks": result.chunks_added,
        "ingest_s": round(ingest_s, 2),
        "chunks_per_s": round(result.chunks_added / ingest_s, 1),
        "model_load_s": round(load_s, 1),
        "cosine_min": round(float(cosines.min()), 6),
        "cosine_mean": round(float(cosines.mean()), 6),
        "cpu_query_finds_own_chunk": f"{found}/{len(chunk_rows)}",
        "fp16": os.environ.get("GROUNDPROXY_CUDA_FP16", "") == "1",
    }
    ok = cosines.min() >= MIN_COSINE and found == len(chunk_rows)
    summary["ok"] = bool(ok)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest_gpu.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary))
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(unpacked, ignore_errors=True)
    return 0 if ok else 1


def _gpu_name() -> str:
    try:
        import torch

        return str(torch.cuda.get_device_name(0)) if torch.cuda.is_available() else "none"
    except Exception:  # no torch CUDA build
        return "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--docs", type=int, default=2000)
    r = sub.add_parser("run")
    r.add_argument("--pack", type=Path, default=PACK)
    r.add_argument("--device", default="cuda")
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gp-out")))
    r.add_argument("--limit", type=int, default=0, help="documents to ingest (0: all)")
    args = ap.parse_args()
    if args.cmd == "pack":
        pack(args.docs)
    else:
        sys.exit(run(args.pack, args.device, args.out, args.limit))


if __name__ == "__main__":
    main()
