"""Embedder bench: torch vs ONNX fp32 vs ONNX int8 — parity with torch and speed.

    .venv/bin/python -m bench.embedder [--sentences 2000] [--rounds 2]

Parity: cosine of each backend's vector to the torch (sentence-transformers) vector on real
sentences from ``../shared/data/eval`` (answers and contexts split at sentence ends), and
retrieval parity: for every sentence used as a query against a corpus of the eval contexts'
~128-token chunks (each backend searching its own embeddings, exact search), the share of
torch's top-3 that the backend also returns (recall@3 overlap).
Speed: texts/s at batch 1, 8 and 64 on short claims and on 128-token chunks; the backends
run interleaved, ``--rounds`` times, best round kept (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import re
import time

import numpy as np

from bench.needs_data import SHARED, require
from groundproxy.guards.types import Embedder

_SENT_END = re.compile(r"(?<=[.!?])\s+")


def sentences(limit: int) -> list[str]:
    """Real sentences (≥ 4 words) from the eval answers, round-robin over the files."""
    per_file: list[list[str]] = []
    for f in sorted((SHARED / "eval").glob("*.jsonl")):
        got: list[str] = []
        for line in f.open(encoding="utf-8"):
            row = json.loads(line)
            for s in _SENT_END.split(str(row.get("response") or "")):
                if len(s.split()) >= 4:
                    got.append(s.strip())
            if len(got) >= limit:
                break
        per_file.append(got)
    out: list[str] = []
    i = 0
    while len(out) < limit and any(i < len(g) for g in per_file):
        out.extend(g[i] for g in per_file if i < len(g))
        i += 1
    return out[:limit]


def chunks(limit: int, words: int = 96) -> list[str]:
    """~128-token passages: eval contexts cut into ``words``-word pieces."""
    out: list[str] = []
    for f in sorted((SHARED / "eval").glob("*.jsonl")):
        got: list[str] = []
        for line in f.open(encoding="utf-8"):
            toks = str(json.loads(line).get("context") or "").split()
            starts = range(0, len(toks) - words + 1, words)
            got.extend(" ".join(toks[s : s + words]) for s in starts)
            if len(got) >= limit // 2:
                break
        out.extend(got[: limit // 2])
    out = list(dict.fromkeys(out))  # eval rows repeat contexts: duplicates would make ties
    rng = np.random.default_rng(0)
    return [out[i] for i in rng.permutation(len(out))[:limit]]


def throughput(emb: Embedder, texts: list[str], batch: int) -> float:
    t = time.perf_counter()
    for s in range(0, len(texts), batch):
        emb.encode(texts[s : s + batch])
    return len(texts) / (time.perf_counter() - t)


def top3(queries: np.ndarray, corpus: np.ndarray) -> np.ndarray:
    return np.argsort(-(queries @ corpus.T), axis=1)[:, :3]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sentences", type=int, default=2000)
    p.add_argument("--corpus", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--backends",
        default="minilm-torch,minilm,minilm-int8",
        help="comma list; the first is the reference",
    )
    p.add_argument("--skip-speed", action="store_true")
    args = p.parse_args()
    require(SHARED)
    from groundproxy.retrieval.embedder import load_embedder

    names = args.backends.split(",")
    ref = names[0]
    backends: dict[str, Embedder] = {}
    for n in names:
        t = time.perf_counter()
        backends[n] = load_embedder(n)
        backends[n].encode(["warm up"])
        print(f"load {n}: {time.perf_counter() - t:.1f} s ({backends[n].name})", flush=True)

    sents, corpus = list(dict.fromkeys(sentences(args.sentences))), chunks(args.corpus)
    vecs = {n: e.encode(sents) for n, e in backends.items()}
    cvecs = {n: e.encode(corpus) for n, e in backends.items()}
    ref_top = top3(vecs[ref], cvecs[ref])
    print(
        f"\nparity vs {ref} on {len(sents)} eval sentences; retrieval over {len(corpus)} "
        "distinct ~128-token eval chunks (exact search)"
    )
    print("| embedder | name | cosine mean | cosine min | chunk cosine min | recall@3 overlap |")
    print("|---|---|---|---|---|---|")
    for n, e in backends.items():
        cos = (vecs[n] * vecs[ref]).sum(axis=1)
        ccos = (cvecs[n] * cvecs[ref]).sum(axis=1)
        top = top3(vecs[n], cvecs[n])
        overlap = np.mean([len(set(a) & set(b)) / 3 for a, b in zip(top, ref_top, strict=True)])
        print(
            f"| {n} | {e.name} | {cos.mean():.6f} | {cos.min():.6f} | {ccos.min():.6f} | "
            f"{overlap:.4f} |",
            flush=True,
        )

    if args.skip_speed:
        return
    short, long_ = sents[:256], corpus[:256]
    plan = [
        ("claims", short, 1, 48),
        ("claims", short, 8, 128),
        ("claims", short, 64, 256),
        ("128-token chunks", long_, 1, 24),
        ("128-token chunks", long_, 8, 64),
        ("128-token chunks", long_, 64, 128),
    ]
    best: dict[tuple[str, int, str], float] = {}
    for _ in range(args.rounds):
        for kind, texts, batch, n_texts in plan:
            for n, e in backends.items():
                key = (kind, batch, n)
                best[key] = max(best.get(key, 0.0), throughput(e, texts[:n_texts], batch))
    print("\ntexts/s (best of rounds, backends interleaved)")
    print(
        "| texts | batch | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{n} / {ref}" for n in names[1:])
        + " |"
    )
    print("|---|---|" + "---|" * (2 * len(names) - 1))
    for kind, _, batch, _ in plan:
        r = [best[(kind, batch, n)] for n in names]
        print(
            f"| {kind} | {batch} | "
            + " | ".join(f"{x:.0f}" for x in r)
            + " | "
            + " | ".join(f"{x / r[0]:.2f}x" for x in r[1:])
            + " |",
            flush=True,
        )


if __name__ == "__main__":
    main()
