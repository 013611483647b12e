"""Score the cross-encoder checkpoint on every eval file (context mode), as bench/accuracy.py.

    HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python -m training.cross_encoder --eval \
        [--ckpt DIR] [--limit 300] [--onnx] [--only q2 ...]

Each row's whole response is the claim, its own context the evidence (windowed by
models.ce_window, as in training); P(supported) = P(entailment). Threshold: the one
stored in ``ce_manifest.json``, chosen on the held-out TRAIN validation split (never on
eval). Rows are read and scored as bench/accuracy.py reads and scores them
(:mod:`groundproxy.models.scoring`: the same seeded ``--limit`` sample, the same
metrics). ms/example counts windowing + tokenization + model.

With ``--onnx`` the checkpoint is exported (optimum, ``<ckpt>/onnx/model.onnx``),
quantized with onnxruntime dynamic int8 (``model.int8.onnx``) and scored too; then the
latency of one 128-token pair is measured at batch 1 and 16 (fp32 torch and int8 ONNX).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from groundproxy.models.ce_window import MAX_LENGTH, encode
from groundproxy.models.scoring import sample_rows, verifier_metrics

Scorer = Callable[[dict[str, Any]], np.ndarray]  # (encoded inputs) -> (n, 3) probabilities
LATENCY_REPEATS = 20


def export_int8(ckpt: Path) -> Path:
    """Export ``ckpt`` to ONNX with optimum and quantize it (dynamic int8); the int8 path."""
    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quantize_dynamic,
    )
    from optimum.exporters.onnx import main_export

    out = ckpt / "onnx"
    int8 = out / "model.int8.onnx"
    if not int8.is_file():
        main_export(str(ckpt), output=str(out), task="text-classification", opset=17)
        quantize_dynamic(str(out / "model.onnx"), str(int8), weight_type=QuantType.QInt8)
    return int8


def onnx_scorer(path: Path, threads: int) -> Scorer:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}

    def score(batch: dict[str, Any]) -> np.ndarray:
        feed = {k: np.asarray(v, dtype=np.int64) for k, v in batch.items() if k in names}
        logits = np.asarray(sess.run(None, feed)[0], dtype=np.float64)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return np.asarray(e / e.sum(axis=1, keepdims=True), dtype=np.float64)

    return score


def torch_scorer(model: Any, device: Any = "cpu") -> Scorer:
    import torch

    model.to(device)

    def score(batch: dict[str, Any]) -> np.ndarray:
        with torch.inference_mode():
            t = {
                k: torch.as_tensor(np.asarray(v), dtype=torch.long, device=device)
                for k, v in batch.items()
            }
            logits = model(**t).logits.float()
            return np.asarray(torch.softmax(logits, dim=-1).cpu().numpy())

    return score


def padded(enc: dict[str, list[list[int]]], idx: Any, pad_id: int) -> dict[str, Any]:
    width = max(len(enc["input_ids"][i]) for i in idx)
    out: dict[str, Any] = {}
    for key, pad in (("input_ids", pad_id), ("token_type_ids", 0), ("attention_mask", 0)):
        out[key] = np.array([enc[key][i] + [pad] * (width - len(enc[key][i])) for i in idx])
    return out


def score_rows(
    rows: list[dict[str, Any]], tok: Any, scorer: Scorer, bs: int = 16
) -> tuple[np.ndarray, float]:
    """P(supported) per row and the seconds it took (windowing + tokenizing + model)."""
    t0 = time.perf_counter()
    pairs = [(str(r["response"] or ""), str(r["context"] or "")) for r in rows]
    enc = encode(tok, pairs, MAX_LENGTH)
    order = np.argsort([len(x) for x in enc["input_ids"]], kind="stable")
    p = np.zeros(len(rows))
    for at in range(0, len(rows), bs):
        idx = order[at : at + bs]
        p[idx] = scorer(padded(enc, idx, int(tok.pad_token_id)))[:, 0]
    return p, time.perf_counter() - t0


def latency(tok: Any, scorers: dict[str, Scorer]) -> dict[str, dict[int, float]]:
    """ms per pair at exactly 128 tokens, batch 1 and 16 (median of repeats)."""
    ids = [tok.cls_token_id] + [1000 + i for i in range(MAX_LENGTH - 2)] + [tok.sep_token_id]
    out: dict[str, dict[int, float]] = {}
    for name, scorer in scorers.items():
        out[name] = {}
        for bs in (1, 16):
            batch = {
                "input_ids": np.array([ids] * bs),
                "token_type_ids": np.array([[0] * 64 + [1] * 64] * bs),
                "attention_mask": np.ones((bs, MAX_LENGTH), dtype=np.int64),
            }
            scorer(batch)  # warm-up
            times = []
            for _ in range(LATENCY_REPEATS if bs == 1 else LATENCY_REPEATS // 4):
                t0 = time.perf_counter()
                scorer(batch)
                times.append(time.perf_counter() - t0)
            out[name][bs] = round(1000.0 * float(np.median(times)) / bs, 2)
    return out


def run_eval(args: argparse.Namespace) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(args.threads)
    manifest = json.loads((args.ckpt / "ce_manifest.json").read_text())
    thr = float(manifest["threshold"])
    tok = AutoTokenizer.from_pretrained(str(args.ckpt))  # type: ignore[no-untyped-call]
    model = AutoModelForSequenceClassification.from_pretrained(str(args.ckpt)).eval()
    from training.ce_resume import pick_device

    scorers: dict[str, Scorer] = {"ce-fp32": torch_scorer(model, pick_device(args.device))}
    if args.onnx:
        scorers["ce-int8"] = onnx_scorer(export_int8(args.ckpt), args.threads)
    files = sorted((args.data / "eval").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    if args.only:
        files = [p for p in files if p.stem in args.only]
    table: list[dict[str, Any]] = []
    for path in files:
        rows = sample_rows(path, args.limit)
        labels = [int(r["label_hallucinated"]) for r in rows]
        for name, scorer in scorers.items():
            p, secs = score_rows(rows, tok, scorer)
            table.append(
                {
                    "verifier": name,
                    "dataset": path.stem,
                    "n": len(rows),
                    **verifier_metrics(labels, p, thr),
                    "ms_per_example": round(1000.0 * secs / len(rows), 2),
                }
            )
            _print_row(table[-1])
    lat = latency(tok, scorers)
    print(f"\ncross-encoder, context mode, threshold {thr} (train validation split)")
    print(
        f"{'dataset':<24}{'verifier':<10}{'n':>6}{'bal.acc':>9}{'F1(hal)':>9}"
        f"{'ROC-AUC':>9}{'ms/ex':>9}"
    )
    for r in table:
        _print_row(r, sys.stdout)
    for name in scorers:
        rs = [r for r in table if r["verifier"] == name]
        print(
            f"mean {name}: bal.acc {np.mean([r['balanced_accuracy'] for r in rs]):.4f}  "
            f"ROC-AUC {np.mean([r['roc_auc'] for r in rs]):.4f}"
        )
    print(f"ms per 128-token pair (batch 1 / batch 16 per pair): {lat}")
    out = args.ckpt / "ce_eval.json"
    out.write_text(
        json.dumps(
            {"threshold": thr, "limit": args.limit, "table": table, "latency_ms_per_pair": lat},
            indent=1,
        )
    )


def _print_row(r: dict[str, Any], fh: Any = sys.stderr) -> None:
    print(
        f"{r['dataset']:<24}{r['verifier']:<10}{r['n']:>6}{r['balanced_accuracy']:>9.3f}"
        f"{r['f1_hallucinated']:>9.3f}{r['roc_auc']:>9.3f}{r['ms_per_example']:>9.1f}",
        file=fh,
        flush=True,
    )
