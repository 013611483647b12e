"""Build the embedhead training set: examples, features, labels (TRAIN data only).

    nice -n 10 .venv/bin/python -m training.prepare [--data ../shared/data]
        [--cap 1500] [--synth-per-source 250] [--work /tmp/gp-embedhead]
        [--nli ../shared/data/nli/nli-permissive.jsonl.gz --nli-cap 1500]

Sources: every ``*.jsonl`` in ``<data>/train`` (``eval/`` is never read), each capped at
``--cap`` rows (seeded sample), plus FactCC-style synthetic triples (training.synth)
from the same sources' contexts. Targets: ``label3`` where a row has one; otherwise
label_hallucinated 0 → supported and 1 → ``not_supported`` (a set-valued target,
{contradicted, unverifiable}: such rows do not say which, so the loss only asks that
P(supported) be low — see training/fit.py).

Rows are split into train / validation by context (15 % of contexts of every source held
out), so no evidence text is shared across the split. For validation rows whose response
has several sentences, per-sentence pairs are featurized too, to measure whether scoring
the whole response or the minimum over its sentences works better.

``--nli FILE`` (issue 42): the pairs of an NLI file (:mod:`training.nli`: a seeded
sample of at most ``--nli-cap`` rows per set, two-way negatives as ``not_supported``) are
featurized too, as extra TRAINING rows only: each set is a source of its own
(``nli:<set>``, weighed by training.fit, ``--nli-share``), and the 5 % of each set's
premises that nli.py holds back get the split ``nli_held`` — never ``val``: the model
choice and the threshold stay on the held-out train/ contexts, and the held-back NLI rows
are reported on their own (three-way accuracy). Only the permissive file may train a
shipped model (the restricted one needs ``--nli-research``).

Outputs under ``--work``: features.npy, meta.jsonl (one line per feature row),
manifest_prepare.json (data file sha256s, settings, wall time).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from groundproxy.models.features import featurize, split_sentences
from training.embed_cache import CachedEncoder
from training.split import SEED as SEED
from training.split import TARGETS as TARGETS
from training.split import in_validation as in_validation
from training.synth import make_synthetic

# the split of the NLI rows nli.py holds back: reported on their own, never validation
NLI_HELD = "nli_held"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def sampled_rows(
    rows: Sequence[dict[str, Any]], source: str, cap: int = 1500
) -> list[dict[str, Any]]:
    """The rows of one train file (``source``: its stem) training reads: all, or a seeded
    sample of ``cap``."""
    if len(rows) > cap:
        return random.Random(f"{SEED}:{source}").sample(list(rows), cap)
    return list(rows)


def training_rows(
    rows: Sequence[dict[str, Any]], source: str, cap: int = 1500, val_frac: float = 0.15
) -> list[dict[str, Any]]:
    """The rows of one train file the verifier was fitted on (its train split): what
    :func:`collect_examples` trains on, for tools that must keep clear of it."""
    sample = sampled_rows(rows, source, cap)
    return [r for r in sample if not in_validation(str(r.get("context") or ""), val_frac)]


def collect_examples(
    data: Path,
    cap: int = 1500,
    synth_per_source: int = 250,
    val_frac: float = 0.15,
    val_sentence_rows: int = 120,
) -> tuple[list[dict[str, Any]], list[tuple[str, str]], list[Path]]:
    """Training examples from ``<data>/train``: (records, (claim, evidence) pairs, files).

    ``records[i]`` describes ``pairs[i]`` (source, split, target, hallucinated, kind, …).
    Row examples come first, then synthetic triples, then the per-sentence validation
    claims (``kind == "val_sentence"``). Deterministic (seeded).
    """
    rng = random.Random(SEED)
    files = sorted((data / "train").glob("*.jsonl"))
    records: list[dict[str, Any]] = []  # one per feature row
    pairs: list[tuple[str, str]] = []
    docs_by_source: dict[str, list[str]] = {}
    val_multi: list[tuple[dict[str, Any], list[str]]] = []
    for path in files:
        source = path.stem
        rows = sampled_rows(read_jsonl(path), source, cap)
        docs: dict[str, None] = {}
        n_multi = 0
        for r in rows:
            context = str(r.get("context") or "")
            response = str(r.get("response") or "")
            if not context.strip() or not response.strip():
                continue
            label3 = r.get("label3")
            if label3 in ("supported", "contradicted", "unverifiable"):
                target = str(label3)
            else:
                target = "not_supported" if int(r["label_hallucinated"]) else "supported"
            split = "val" if in_validation(context, val_frac) else "train"
            if split == "train":
                docs[context] = None
            rec = {
                "source": source,
                "split": split,
                "target": TARGETS[target],
                "hallucinated": int(r["label_hallucinated"]),
                "row": str(r.get("id")),
                "kind": "row",
            }
            records.append(rec)
            pairs.append((response, context))
            sents = split_sentences(response)
            if split == "val" and len(sents) > 1 and n_multi < val_sentence_rows:
                n_multi += 1
                val_multi.append(({**rec, "context": context}, sents))
        docs_by_source[source] = list(docs)
        print(f"{source}: {len(rows)} rows", file=sys.stderr, flush=True)

    synth = make_synthetic({s: d[:1500] for s, d in docs_by_source.items()}, synth_per_source, SEED)
    for source, ex in synth:
        records.append(
            {
                "source": "synthetic",
                "origin": source,
                "split": "val" if rng.random() < val_frac else "train",
                "target": TARGETS[ex.label],
                "hallucinated": int(ex.label != "supported"),
                "row": "",
                "kind": f"synthetic:{ex.kind}",
                "claim": ex.claim,
            }
        )
        pairs.append((ex.claim, ex.evidence))
    # per-sentence claims of multi-sentence validation responses (aggregation study)
    for m, (rec, sents) in enumerate(val_multi):
        for sent in sents:
            records.append(
                {
                    **{k: v for k, v in rec.items() if k != "context"},
                    "kind": "val_sentence",
                    "group": m,
                }
            )
            pairs.append((sent, str(rec["context"])))
    print(f"{len(pairs)} feature rows ({len(synth)} synthetic)", file=sys.stderr, flush=True)
    return records, pairs, files


def nli_training_examples(
    path: Path, cap: int, research: bool = False
) -> tuple[list[dict[str, Any]], list[tuple[str, str]], dict[str, dict[str, int]]]:
    """The pairs of NLI file ``path`` as extra training rows: (records, pairs, counts per
    set and split). nli.py's held-back rows get the split :data:`NLI_HELD` instead of
    ``val``, so no NLI row ever chooses a model or a threshold."""
    from training.nli import nli_examples  # nli imports this module

    records, pairs = nli_examples(path, cap, research)
    counts: dict[str, dict[str, int]] = {}
    for rec in records:
        if rec["split"] != "train":
            rec["split"] = NLI_HELD
        per = counts.setdefault(str(rec["source"]), {"train": 0, NLI_HELD: 0})
        per[str(rec["split"])] += 1
    return records, pairs, counts


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--cap", type=int, default=1500)
    ap.add_argument("--synth-per-source", type=int, default=250)
    ap.add_argument("--val-frac", type=float, default=0.15)
    ap.add_argument("--val-sentence-rows", type=int, default=120)
    ap.add_argument("--work", type=Path, default=Path("/tmp/gp-embedhead"))
    ap.add_argument(
        "--nli",
        type=Path,
        default=None,
        help="also featurize this NLI file's pairs as training rows "
        "(../shared/data/nli/nli-permissive.jsonl.gz)",
    )
    ap.add_argument("--nli-cap", type=int, default=1500, help="rows per NLI set (0: every row)")
    ap.add_argument(
        "--nli-research",
        action="store_true",
        help="allow the restricted NLI file (a research variant only, never shipped)",
    )
    args = ap.parse_args(argv)
    started = time.time()
    args.work.mkdir(parents=True, exist_ok=True)
    records, pairs, files = collect_examples(
        args.data, args.cap, args.synth_per_source, args.val_frac, args.val_sentence_rows
    )
    data_files = {f"train/{p.name}": sha256_file(p) for p in files}
    nli_counts: dict[str, dict[str, int]] = {}
    if args.nli is not None:
        nli_records, nli_pairs, nli_counts = nli_training_examples(
            args.nli, args.nli_cap, args.nli_research
        )
        records, pairs = records + nli_records, pairs + nli_pairs
        data_files[f"nli/{args.nli.name}"] = sha256_file(args.nli)
        print(f"nli: {len(nli_pairs)} pairs from {args.nli.name}", file=sys.stderr, flush=True)

    from groundproxy.retrieval.embedder import load_embedder

    encoder = CachedEncoder(load_embedder(), args.work / "cache")
    feats = featurize(pairs, encoder)
    np.save(args.work / "features.npy", feats)
    with (args.work / "meta.jsonl").open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")
    manifest = {
        "data_files": data_files,
        "nli_rows": nli_counts,
        "settings": {**{k: str(v) for k, v in vars(args).items()}, "seed": SEED},
        "n_rows": len(records),
        "wall_s": round(time.time() - started, 1),
        "cpu_s": round(sum(os.times()[:2]), 1),
    }
    (args.work / "manifest_prepare.json").write_text(json.dumps(manifest, indent=2))
    print(json.dumps({k: v for k, v in manifest.items() if k != "data_files"}), flush=True)


if __name__ == "__main__":
    main()
