"""The ONNX steps of ``groundproxy models build`` (models.build): export with optimum, the
causal LM's graph cut to its three label-word logits, dynamic int8 quantization, and the
parity check of fp32 and int8 ONNX against torch on three probe pairs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Literal

import numpy as np

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import VERDICTS, Pair, Verdict
from groundproxy.models.built_verifier import BuiltVerifier

Kind = Literal["nli", "causal-lm"]
FP32_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
_PROBE_EVIDENCE = "The warranty of the Acme robot lasts 12 months from the date of purchase."
PROBES: tuple[tuple[Verdict, Pair], ...] = (
    ("supported", Pair("The warranty lasts 12 months.", _PROBE_EVIDENCE)),
    ("contradicted", Pair("The warranty lasts 24 months.", _PROBE_EVIDENCE)),
    ("unverifiable", Pair("The robot was designed by a team in Paris.", _PROBE_EVIDENCE)),
)


def cut_to_label_logits(fp32: Path, label_ids: list[int]) -> None:
    """Rewrite the exported LM graph: ``label_logits`` [batch, 1, 3] at the last position.

    The final ``MatMul(hidden, W)`` producing ``logits`` gets the last position of
    ``hidden`` and the three label columns of ``W`` only.
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(fp32))
    graph = model.graph
    nodes = [n for n in graph.node if "logits" in n.output]
    if len(nodes) != 1 or nodes[0].op_type != "MatMul":
        raise ModelLoadError("unexpected LM graph: 'logits' is not produced by one MatMul")
    node = nodes[0]
    hidden, weight = node.input[0], node.input[1]
    graph.initializer.append(numpy_helper.from_array(np.array([-1], dtype=np.int64), "gp_last"))
    ids = np.array(label_ids, dtype=np.int64)
    inits = {init.name: init for init in graph.initializer}
    used_elsewhere = any(weight in n.input for n in graph.node if n is not node)
    added = [helper.make_node("Gather", [hidden, "gp_last"], ["gp_last_hidden"], axis=1)]
    if weight in inits and not used_elsewhere:
        w = numpy_helper.to_array(inits[weight])
        graph.initializer.remove(inits[weight])
        graph.initializer.append(numpy_helper.from_array(w[:, ids], "gp_label_weight"))
    else:
        graph.initializer.append(numpy_helper.from_array(ids, "gp_label_ids"))
        added.append(
            helper.make_node("Gather", [weight, "gp_label_ids"], ["gp_label_weight"], axis=1)
        )
    node.input[0] = "gp_last_hidden"
    node.input[1] = "gp_label_weight"
    node.output[0] = "label_logits"
    nodes = list(graph.node)
    at = nodes.index(node)
    nodes[at:at] = added  # the new Gathers run just before the MatMul (topological order)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.output[:]
    graph.output.append(
        helper.make_tensor_value_info("label_logits", onnx.TensorProto.FLOAT, ["batch", 1, 3])
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(fp32))


def export(model: Any, kind: Kind, out: Path) -> None:
    from optimum.exporters.onnx import onnx_export_from_model

    task = "text-classification" if kind == "nli" else "text-generation"
    export_dir = out / "_export"
    onnx_export_from_model(model, export_dir, task=task, do_validation=False, no_post_process=True)
    (export_dir / "model.onnx").rename(out / FP32_FILE)
    if any(export_dir.glob("*.onnx_data")) or any(export_dir.glob("*.data")):
        raise ModelLoadError("the model is too large for one ONNX file (external data)")
    shutil.rmtree(export_dir)


def quantize(out: Path) -> None:
    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quantize_dynamic,
    )

    # u8 weights, one scale per output channel. Signed int8 weights (onnxruntime's default)
    # run on x86 CPUs without VNNI (AVX2 only) through a u8×s8 kernel whose int16 pair sums
    # saturate: the tiny test Llama's int8-vs-fp32 max |Δp| was 0.69 on such a CPU against
    # 0.015 with the same int8 weights simulated in fp32. u8×u8 does not saturate; per
    # channel keeps the weight error small (0.033 on that model; per tensor 0.061).
    quantize_dynamic(
        str(out / FP32_FILE), str(out / INT8_FILE),
        weight_type=QuantType.QUInt8, per_channel=True,
    )  # fmt: skip


def torch_probs(model: Any, tokenizer: Any, meta: dict[str, Any]) -> list[list[float]]:
    """P(verdicts) of the probes by the torch model itself (checks the export)."""
    import torch

    rows = []
    for _, pair in PROBES:
        if meta["kind"] == "nli":
            a, b = (
                (pair.claim, pair.evidence)
                if meta["pair_order"] == "claim-evidence"
                else (pair.evidence, pair.claim)
            )
            enc = tokenizer(
                a, b, return_tensors="pt", truncation=True, max_length=meta["max_length"]
            )
            with torch.no_grad():
                logits = model(**enc).logits[0]
            order = {v: int(k) for k, v in meta["labels"].items()}
            picked = torch.stack([logits[order[v]] for v in VERDICTS])
        else:
            text = (
                meta["prompt"].replace("{evidence}", pair.evidence).replace("{claim}", pair.claim)
            )
            enc = tokenizer(text, return_tensors="pt", add_special_tokens=False)
            with torch.no_grad():
                logits = model(**enc).logits[0, -1]
            words = meta["label_words"]
            picked = torch.stack([logits[int(words[v]["token_id"])] for v in VERDICTS])
        rows.append([float(x) for x in torch.softmax(picked.double(), dim=0)])
    return rows


def parity(out: Path, torch_rows: list[list[float]]) -> dict[str, Any]:
    pairs = [pair for _, pair in PROBES]
    fp32 = BuiltVerifier(out, "fp32").score(pairs)
    int8 = BuiltVerifier(out, "int8").score(pairs)
    as_rows = [[p.supported, p.contradicted, p.unverifiable] for p in fp32]
    i8_rows = [[p.supported, p.contradicted, p.unverifiable] for p in int8]
    probes: list[dict[str, Any]] = []
    for (expected, pair), p32, p8 in zip(PROBES, fp32, int8, strict=True):
        p8_dict = p8.as_dict()
        probes.append(
            {
                "claim": pair.claim,
                "expected": expected,
                "fp32": p32.as_dict(),
                "int8": p8.as_dict(),
                "verdict_int8": max(p8_dict, key=p8_dict.__getitem__),
            }
        )
    return {
        "evidence": _PROBE_EVIDENCE,
        "torch_vs_fp32_max_abs": round(float(np.abs(np.array(torch_rows) - as_rows).max()), 6),
        "int8_vs_fp32_max_abs": round(float(np.abs(np.array(i8_rows) - as_rows).max()), 6),
        "probes": probes,
    }
