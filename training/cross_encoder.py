"""Design (a): a three-label cross-encoder fine-tuned from all-MiniLM-L6-v2 (TRAIN data only).

    HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python -m training.cross_encoder \
        [--out DIR] [--minutes 40] [--steps N] [--data ../shared/data]
    HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python -m training.cross_encoder --eval \
        [--ckpt DIR] [--limit 300] [--onnx]

The checkpoint folder (``--out`` when training, ``--ckpt`` when scoring) defaults to
``ce-ckpt`` in groundproxy's cache (``$GROUNDPROXY_CACHE``, else ``~/.cache/groundproxy``),
outside the repository.

Data: the examples of training.prepare (every source of ``<data>/train`` capped,
FactCC-style synthetic triples, split by context). Train batches are drawn with the
weights of training/fit.py (each source ∝ √rows, half per binary class), in chunks
sorted by length (dynamic padding). Targets: label3; rows with only label_hallucinated=1
are "not supported" and their loss is −log(P(contradiction) + P(neutral)).

Pairs are (claim first, evidence window) of ≤ 128 tokens (models.ce_window). The
model is a standard BertForSequenceClassification with id2label {0: entailment,
1: contradiction, 2: neutral} (entailment = supported, contradiction = contradicted,
neutral = unverifiable); it is saved with ``save_pretrained`` (model + tokenizer) with
``ce_manifest.json`` (data sha256s, settings, wall time, examples seen, the threshold on
P(supported) chosen on the held-out TRAIN validation split, validation figures).

Training is time-boxed (``--minutes``); the learning rate warms up then decays linearly
over the time box. ``--steps N`` makes it a resumable step plan instead (training.
ce_resume): the learning rate follows the N steps, ``--minutes`` / ``--run-steps`` only
bound one run, the whole state is saved under ``<out>/resume/`` every ``--save-every``
minutes and at the end, and the same command run again continues where it stopped — on a
CPU over many sessions, or on a GPU (``--device auto`` picks it; ``--bf16``). Each run ends
with an exported checkpoint (``complete: false`` in the manifest until the plan is done).
``--cap 0`` trains on every row of every train file (default: 1,500 per file).
One short accelerator run: training/gpu_train.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from groundproxy.models.ce_window import MAX_LENGTH, encode
from training import ce_resume, nli
from training.fit import best_threshold, per_source_metrics
from training.prepare import DEFAULT_DATA, SEED, collect_examples, sha256_file

ID2LABEL = {0: "entailment", 1: "contradiction", 2: "neutral"}
CHUNK_BATCHES = 50


def sample_weights(sources: list[str], halluc: list[int]) -> np.ndarray:
    """fit.py's weights: each source ∝ √(its rows), half per binary class; sums to 1."""
    src = np.array(sources)
    hal = np.array(halluc)
    w = np.zeros(len(src))
    for s in sorted(set(sources)):
        ms = src == s
        for h in (0, 1):
            mh = ms & (hal == h)
            if mh.sum():
                w[mh] = np.sqrt(ms.sum()) / 2.0 / mh.sum()
    return np.asarray(w / w.sum(), dtype=np.float64)


def batches(
    lengths: np.ndarray, probs: np.ndarray, batch_size: int, rng: np.random.Generator
) -> Any:
    """Endless weighted-sample batches; each chunk sorted by length, batch order shuffled."""
    while True:
        idx = rng.choice(len(probs), size=batch_size * CHUNK_BATCHES, p=probs)
        idx = idx[np.argsort(lengths[idx], kind="stable")]
        chunk = [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]
        for j in rng.permutation(len(chunk)):
            yield chunk[j]


def collate(enc: dict[str, list[list[int]]], idx: Any, pad_id: int) -> dict[str, Any]:
    import torch

    width = max(len(enc["input_ids"][i]) for i in idx)
    out: dict[str, Any] = {}
    for key, pad in (("input_ids", pad_id), ("token_type_ids", 0), ("attention_mask", 0)):
        rows = [enc[key][i] + [pad] * (width - len(enc[key][i])) for i in idx]
        out[key] = torch.tensor(rows, dtype=torch.long)
    return out


def predict(
    model: Any, enc: dict[str, list[list[int]]], pad_id: int, device: Any = None, bs: int = 64
) -> np.ndarray:
    """Softmax probabilities (n, 3) in id order, batches sorted by length."""
    import torch

    n = len(enc["input_ids"])
    order = np.argsort([len(x) for x in enc["input_ids"]], kind="stable")
    out = np.zeros((n, 3), dtype=np.float32)
    model.eval()
    with torch.inference_mode():
        for at in range(0, n, bs):
            idx = order[at : at + bs]
            batch = {k: v.to(device or "cpu") for k, v in collate(enc, idx, pad_id).items()}
            logits = model(**batch).logits.float()
            out[idx] = torch.softmax(logits, dim=-1).cpu().numpy()
    return out


def set_seeds() -> None:
    import torch

    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)


def train(args: argparse.Namespace) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from groundproxy.retrieval.embedder import model_path

    started = time.time()
    torch.set_num_threads(args.threads)
    set_seeds()
    records, pairs, files = collect_examples(args.data, cap=args.cap if args.cap > 0 else 10**9)
    data_sha = {f"train/{p.name}": sha256_file(p) for p in files}
    if args.nli is not None:
        nli_records, nli_pairs = nli.nli_examples(args.nli, args.nli_cap, args.nli_research)
        records, pairs = records + nli_records, pairs + nli_pairs
        data_sha[f"nli/{args.nli.name}"] = sha256_file(args.nli)
        print(f"nli: {len(nli_pairs)} pairs from {args.nli.name}", file=sys.stderr, flush=True)
    base = [i for i, r in enumerate(records) if r["kind"] != "val_sentence"]
    tr = [i for i in base if records[i]["split"] == "train"]
    va = [i for i in base if records[i]["split"] == "val" and records[i]["source"] != "synthetic"]
    backbone = args.backbone or model_path()
    tok = AutoTokenizer.from_pretrained(str(backbone))  # type: ignore[no-untyped-call]
    model = AutoModelForSequenceClassification.from_pretrained(
        str(backbone),
        num_labels=3,
        id2label=ID2LABEL,
        label2id={v: k for k, v in ID2LABEL.items()},
    )
    # a backbone saved in fp16 (gpu_pack's) loads as fp16 under transformers 5 (dtype "auto"):
    # AdamW on fp16 weights turns to NaN; train in fp32 (bf16 autocast does the speed)
    model = model.float()
    t0 = time.time()
    enc_tr = encode(tok, [pairs[i] for i in tr], MAX_LENGTH)
    enc_va = encode(tok, [pairs[i] for i in va], MAX_LENGTH)
    print(
        f"encoded {len(tr)} train / {len(va)} val pairs in {time.time() - t0:.0f}s",
        file=sys.stderr,
        flush=True,
    )
    target = torch.tensor([records[i]["target"] for i in tr], dtype=torch.long)
    tr_sources = [records[i]["source"] for i in tr]
    probs = nli.mixed_weights(
        tr_sources,
        sample_weights(tr_sources, [records[i]["hallucinated"] for i in tr]),
        args.nli_share,
    )
    lengths = np.array([len(x) for x in enc_tr["input_ids"]])
    if args.freeze_word_embeddings:  # 30k×384 of 22M weights: most of AdamW's work
        model.base_model.embeddings.word_embeddings.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    plan = ce_resume.plan_of(vars(args), data_sha)
    progress = ce_resume.Progress()
    if args.steps:
        progress = ce_resume.load(args.out, plan, model, opt, args.fresh)
        if progress.step:
            print(
                f"resuming at step {progress.step} of {args.steps} ({progress.seen} seen)",
                file=sys.stderr,
                flush=True,
            )
    device = ce_resume.pick_device(args.device)
    model.to(device)
    pad_id = int(tok.pad_token_id)
    budget_s = args.minutes * 60.0
    save_every_s = args.save_every * 60.0
    # a resumed run draws a fresh stream of weighted samples (sampling is with replacement)
    rng = np.random.default_rng([SEED, progress.step])
    start_step = progress.step
    train_started = last_save = time.time()
    spent_before = progress.train_s
    model.train()
    for idx in batches(lengths, probs, args.batch_size, rng):
        elapsed = time.time() - train_started
        if args.steps:
            ran = progress.step - start_step
            if progress.step >= args.steps or elapsed >= budget_s or ran == args.run_steps:
                break
            frac = progress.step / args.steps
        else:
            if elapsed >= budget_s:
                break
            frac = elapsed / budget_s
        scale = ce_resume.lr_scale(frac, args.warmup)
        for g in opt.param_groups:
            g["lr"] = args.lr * scale
        batch = {k: v.to(device) for k, v in collate(enc_tr, idx, pad_id).items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(**batch).logits
        logp = torch.log_softmax(logits.float(), dim=-1)
        t = target[idx].to(device)
        single = logp.gather(1, t.clamp(max=2).unsqueeze(1)).squeeze(1)
        notsup = torch.logsumexp(logp[:, 1:], dim=-1)
        loss = -torch.where(t == 3, notsup, single).mean()
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        progress.step += 1
        progress.seen += len(idx)
        if progress.step % 20 == 0:
            print(
                f"step {progress.step} seen {progress.seen} loss {loss.item():.4f} "
                f"{progress.seen / (spent_before + time.time() - train_started):.1f} ex/s "
                f"lr {opt.param_groups[0]['lr']:.2e}",
                file=sys.stderr,
                flush=True,
            )
        if args.steps and time.time() - last_save >= save_every_s:
            progress.train_s = spent_before + time.time() - train_started
            ce_resume.save(args.out, plan, model, opt, progress)
            last_save = time.time()
    progress.train_s = spent_before + time.time() - train_started
    if args.steps:
        ce_resume.save(args.out, plan, model, opt, progress)
        if progress.step < args.steps:
            print(
                f"stopped at step {progress.step} of {args.steps} (time box); the same "
                "command resumes from here",
                file=sys.stderr,
                flush=True,
            )
    step, seen = progress.step, progress.seen
    train_s = progress.train_s
    t0 = time.time()
    p_va = predict(model, enc_va, pad_id, device)
    val_s = time.time() - t0
    src = np.array([records[i]["source"] for i in va])
    hal = np.array([records[i]["hallucinated"] for i in va])
    fact = np.array([not s.startswith("nli:") for s in src.tolist()])
    # the threshold serves fact-check claims: chosen on the held-out train/ sources only
    thr, thr_ba = best_threshold(src[fact], hal[fact], p_va[fact, 0])
    val = per_source_metrics(src, hal, p_va[:, 0], thr)
    nli_val = nli_accuracy([records[i] for i in va], p_va)
    args.out.mkdir(parents=True, exist_ok=True)
    model.to("cpu").save_pretrained(str(args.out))
    tok.save_pretrained(str(args.out))
    manifest = {
        "design": "cross-encoder (a)",
        "backbone": f"all-MiniLM-L6-v2 ({backbone})",
        "id2label": ID2LABEL,
        "threshold": thr,
        "threshold_note": "hallucinated if P(entailment) < threshold; maximizes mean "
        "per-source balanced accuracy on held-out TRAIN contexts (validation split)",
        "data_files": data_sha,
        "settings": {
            **{k: str(v) for k, v in vars(args).items()},
            "seed": SEED,
            "max_length": MAX_LENGTH,
            "torch": torch.__version__,
        },
        "n_train_pairs": len(tr),
        "n_val_pairs": len(va),
        "steps": step,
        "planned_steps": args.steps or None,
        "complete": not args.steps or step >= args.steps,
        "device": str(device),
        "examples_seen": seen,
        "train_wall_s": round(train_s, 1),
        "examples_per_s": round(seen / train_s, 2),
        "val_predict_ms_per_pair": round(1000.0 * val_s / max(1, len(va)), 2),
        "wall_s": round(time.time() - started, 1),
        "cpu_s": round(sum(os.times()[:2]), 1),
        "validation": {
            "threshold_mean_balanced_accuracy": round(thr_ba, 4),
            "mean_roc_auc": round(float(np.mean([d["roc_auc"] for d in val.values()])), 4),
            "per_source": {k: {m: round(v, 4) for m, v in d.items()} for k, d in val.items()},
            "nli_three_way_accuracy": nli_val,
        },
    }
    (args.out / "ce_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(
        json.dumps({k: v for k, v in manifest.items() if k != "data_files"}, indent=1), flush=True
    )


def nli_accuracy(records: list[dict[str, Any]], probs: np.ndarray) -> dict[str, float]:
    """Three-way accuracy on the held-back rows of each NLI set that has ``label3``."""
    hits: dict[str, list[int]] = {}
    for rec, p in zip(records, probs, strict=True):
        if rec.get("kind") == "nli" and rec.get("three_way"):
            hits.setdefault(rec["source"], []).append(int(int(np.argmax(p)) == rec["target"]))
    return {k: round(float(np.mean(v)), 4) for k, v in sorted(hits.items())}


def default_checkpoint() -> Path:
    """``ce-ckpt`` in groundproxy's cache folder (never inside the repository)."""
    from groundproxy.retrieval.onnx_embedder import cache_root

    # training code is not the server: it reads the server's cache setting itself
    env = os.environ.get("GROUNDPROXY_CACHE")
    return (Path(env) if env else cache_root()) / "ce-ckpt"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    checkpoint = default_checkpoint()
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument(
        "--out",
        type=Path,
        default=checkpoint,
        help=f"where the checkpoint is saved (default {checkpoint})",
    )
    ap.add_argument("--minutes", type=float, default=40.0)
    ap.add_argument(
        "--steps",
        type=int,
        default=0,
        help="a step plan, resumable: --minutes then bounds each run (0: one time-boxed run)",
    )
    ap.add_argument(
        "--run-steps", type=int, default=-1, help="steps this run may take (--steps; -1: all)"
    )
    ap.add_argument("--cap", type=int, default=1500, help="rows per train file (0: every row)")
    ap.add_argument(
        "--nli",
        type=Path,
        default=None,
        help="also train on this NLI file (../shared/data/nli/nli-permissive.jsonl.gz)",
    )
    ap.add_argument("--nli-cap", type=int, default=0, help="rows per NLI set (0: every row)")
    ap.add_argument(
        "--nli-share", type=float, default=0.5, help="share of the batches drawn from --nli"
    )
    ap.add_argument(
        "--nli-research",
        action="store_true",
        help="allow the restricted NLI file (a research variant only, never shipped)",
    )
    ap.add_argument("--device", default="auto", help="auto (GPU when there is one), cpu, cuda")
    ap.add_argument(
        "--backbone",
        type=Path,
        default=None,
        help="start from this checkpoint folder (default: the packaged all-MiniLM-L6-v2)",
    )
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (on a GPU)")
    ap.add_argument(
        "--save-every", type=float, default=5.0, help="minutes between saved states (--steps)"
    )
    ap.add_argument("--fresh", action="store_true", help="start the step plan over")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--warmup", type=float, default=0.06)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--train-word-embeddings",
        dest="freeze_word_embeddings",
        action="store_false",
        help="also fine-tune the word embedding matrix (frozen by default: speed)",
    )
    ap.add_argument("--eval", action="store_true", help="score the eval files instead")
    ap.add_argument(
        "--ckpt",
        type=Path,
        default=checkpoint,
        help=f"the checkpoint --eval scores (default {checkpoint})",
    )
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--onnx", action="store_true", help="also export + score int8 ONNX")
    ap.add_argument("--only", nargs="*", default=None)
    return ap


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    if args.eval:
        from training.ce_eval import run_eval

        run_eval(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
