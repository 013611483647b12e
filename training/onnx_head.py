"""The embedhead's MLP as a plain ONNX graph (standardize, MatMul/Add/Relu, Softmax) and a
plain run of one (``training.fit`` writes it; ``training.contradiction`` reads its output)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.models.features import N_FEATURES

Arr = npt.NDArray[Any]


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
