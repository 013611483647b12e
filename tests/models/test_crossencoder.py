"""The shipped opt-in verifier ``crossencoder``: the GPU-trained cross-encoder, int8 ONNX
from models/ (real model file, real onnxruntime session; nothing is downloaded)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import Pair
from groundproxy.guards.verdict.cache import CachingVerifier, VerdictCache
from groundproxy.guards.verdict.decide import contradiction_bar, model_threshold
from groundproxy.models.built_verifier import BuiltVerifier, load_build
from groundproxy.models.registry import DEFAULT_VERIFIER, SHIPPED_MODELS, VerifierRegistry

CE_DIR = SHIPPED_MODELS / "crossencoder"
EVIDENCE = "The warranty of the Acme robot lasts 12 months from the date of purchase."


def test_the_shipped_cross_encoder_loads_by_name(monkeypatch: Any) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("loading the shipped verifier opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    registry = VerifierRegistry()
    ce = registry.get("crossencoder")
    assert isinstance(ce, BuiltVerifier) and ce.variant == "int8"
    assert ce.name == "crossencoder" != DEFAULT_VERIFIER == "embedhead"  # opt-in
    build = load_build(CE_DIR)
    # threshold and contradiction bar fitted on held-out TRAIN data, read through wrappers
    wrapped = CachingVerifier(ce, VerdictCache(), "t")
    assert model_threshold(wrapped) == build["threshold"] == 0.1
    assert contradiction_bar(wrapped) == build["contradiction_min"] >= 0.99
    figures = build["validation"]["contradiction"]["at_bar"]
    assert figures["false_rate_pooled"] <= 0.005 and figures["n_supported"] >= 1000


def test_the_cross_encoder_reads_supported_contradicted_and_unrelated() -> None:
    ce = VerifierRegistry().get("crossencoder")
    right, wrong, other = ce.score(
        [
            Pair("The warranty lasts 12 months.", EVIDENCE),
            Pair("The warranty lasts 24 months.", EVIDENCE),
            Pair("The robot can climb stairs.", EVIDENCE),
        ]
    )
    assert right.supported > 0.9 and wrong.supported < 0.1 and other.supported < 0.1
    assert wrong.contradicted > 0.9  # as the card says: "not supported" reads contradiction
    assert abs(right.supported + right.contradicted + right.unverifiable - 1.0) < 1e-6


def test_a_replaced_model_file_is_refused(tmp_path: Any) -> None:
    folder = tmp_path / "crossencoder"
    folder.mkdir()
    for name in ("build.json", "tokenizer.json"):
        (folder / name).write_bytes((CE_DIR / name).read_bytes())
    (folder / "model.int8.onnx").write_bytes(b"not the model")
    with pytest.raises(ModelLoadError, match="checksum"):
        BuiltVerifier(folder, "int8")
    build = json.loads((CE_DIR / "build.json").read_text(encoding="utf-8"))
    assert set(build["files"]) == {"int8"}  # the fp32 file is not shipped


def test_the_cross_encoder_ships_its_own_learned_decision() -> None:
    from groundproxy.proxy.storage.adapters import shipped_decision

    combiner = shipped_decision("crossencoder")
    content = json.loads((CE_DIR / "answer-combiner.json").read_text(encoding="utf-8"))
    assert content["verifier"] == "crossencoder" and content["source"] == "shipped"
    assert combiner.threshold == content["threshold"]
    # fitted on TRAIN only, leave-one-train-file-out figures kept beside it
    assert content["fit"]["mean_balanced_accuracy"] > 0.7
    assert all(not name.startswith("eval") for name in content["fit"]["leave_one_file_out"])


def test_the_strong_rung_runs_on_cuda_where_onnxruntime_has_it() -> None:
    import onnxruntime as ort

    from groundproxy.models.built_verifier import session_providers

    assert session_providers(["CPUExecutionProvider"]) == ["CPUExecutionProvider"]
    gpu = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    assert session_providers(gpu) == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    verifier = BuiltVerifier(SHIPPED_MODELS / "crossencoder", "int8")
    want = session_providers(ort.get_available_providers())
    assert verifier.providers[0] == want[0]  # the session got what was asked (CPU here)
