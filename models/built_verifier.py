"""A verifier built by ``groundproxy models build`` (models.build): ONNX + tokenizer on disk.

``build.json`` says the kind:

``nli``        the (claim, evidence) pair is tokenized as a sentence pair in the model's
               order; P = softmax(logits) mapped to verdicts with the build's ``labels``.
``causal-lm``  the pair fills the build's prompt template; the graph returns the logits of
               the three label words' first tokens at the last position (left padding);
               P = their softmax.

Long evidence is cut to the sentences that best match the claim and fit ``max_length``
(models.ce_window, the cross-encoder's window). The ONNX files' sha256 are checked
at load; one onnxruntime session per verifier (the registry loads each name once), on CUDA
where onnxruntime has it, else on the CPU (:func:`session_providers`).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import VERDICTS, Pair, Probs
from groundproxy.models.ce_window import select_evidence
from groundproxy.models.features import clip_claim
from groundproxy.models.ranker_file import read_ranker

BUILD_FILE = "build.json"
Variant = Literal["int8", "fp32"]
_PLACEHOLDER = re.compile(r"\{(claim|evidence)\}")
NLI_SPECIAL_TOKENS = 3  # [CLS] a [SEP] b [SEP]


def load_build(model_dir: Path) -> dict[str, Any]:
    try:
        meta: dict[str, Any] = json.loads((model_dir / BUILD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {model_dir / BUILD_FILE}: {exc}") from exc
    if meta.get("kind") not in ("nli", "causal-lm"):
        raise ModelLoadError(f"{model_dir / BUILD_FILE}: unknown kind {meta.get('kind')!r}")
    return meta


def checked_bytes(model_dir: Path, variant: str, meta: dict[str, Any]) -> bytes:
    """The ``variant`` ONNX file's bytes, after checking its sha256 against ``build.json``."""
    try:
        path = model_dir / str(meta["files"][variant])
        expected = str(meta["sha256"][path.name])
        data = path.read_bytes()
    except (KeyError, TypeError, OSError) as exc:
        raise ModelLoadError(f"{model_dir.name}: no readable {variant} model: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != expected:
        raise ModelLoadError(
            f"{model_dir.name}: checksum mismatch for {path}; the model file is corrupt or "
            "was replaced (rebuild it with groundproxy models build)"
        )
    return data


CUDA = "CUDAExecutionProvider"


def session_providers(available: Sequence[str]) -> list[str]:
    """The onnxruntime providers a built verifier's session asks for: CUDA first where this
    onnxruntime has it (the ladder's strong rung on a GPU; nodes CUDA lacks, such as some
    int8 ones, fall back to the CPU), else the CPU alone."""
    return [CUDA, "CPUExecutionProvider"] if CUDA in available else ["CPUExecutionProvider"]


def fill_prompt(template: str, claim: str, evidence: str) -> str:
    """The template with {claim} and {evidence} replaced in one pass (braces in the texts
    are never read as placeholders)."""
    values = {"claim": claim, "evidence": evidence}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


class BuiltVerifier:
    """Three-label verifier over a built ONNX model.

    ``batch_size`` defaults to 1 for int8: dynamic quantization scales activations per
    input tensor, so a batched row's result would depend on its batch mates (and their
    padding); fp32 runs batches of 16 sorted by length.
    """

    def __init__(
        self,
        model_dir: Path,
        variant: Variant = "int8",
        *,
        threads: int = 2,
        batch_size: int | None = None,
    ) -> None:
        self.meta = load_build(model_dir)
        self.kind: str = self.meta["kind"]
        self.variant = variant
        self.name = str(self.meta["name"]) + ("" if variant == "int8" else "@fp32")
        self.max_length = int(self.meta["max_length"])
        # P(supported) decision threshold from the build (train data), else 0.5
        self.threshold = float(self.meta.get("threshold", 0.5))
        # the bar P(contradicted) must reach for a model-only 'contradicted' (guards.verdict.decide)
        self.contradiction_min = float(self.meta.get("contradiction_min", 0.5))
        # how likely each verdict is wrong (guards.verdict.uncertainty), when the build ships one
        self.error_ranker = read_ranker(model_dir)
        self.batch_size = batch_size or (1 if variant == "int8" else 16)
        data = checked_bytes(model_dir, variant, self.meta)
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer  # type: ignore[import-untyped]

            self._tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            self._counter = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            providers = session_providers(ort.get_available_providers())
            self._session = ort.InferenceSession(data, options, providers=providers)
        except Exception as exc:  # onnxruntime / tokenizers raise their own types
            raise ModelLoadError(f"{self.name}: cannot load the model: {exc}") from exc
        self.providers: list[str] = list(self._session.get_providers())
        # two tokenizers, configured once (their settings are shared state): ``_tok``
        # encodes model inputs (pairs truncated to max_length), ``_counter`` counts tokens
        self._tok.no_padding()
        self._tok.enable_truncation(self.max_length, strategy="longest_first")
        self._counter.no_padding()
        self._counter.no_truncation()
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._output = self._session.get_outputs()[0].name
        if self.kind == "nli":
            by_verdict = {v: int(k) for k, v in self.meta["labels"].items()}
            self._columns = [by_verdict[v] for v in VERDICTS]
            self._claim_first = self.meta.get("pair_order") == "claim-evidence"
        else:
            self._template = str(self.meta["prompt"])
            self._overhead = self._count(fill_prompt(self._template, "", ""))
        self._lock = threading.Lock()

    def _count(self, text: str) -> int:
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def _encode_nli(self, pair: Pair) -> tuple[list[int], list[int]]:
        claim = clip_claim(pair.claim) or "."
        n_claim = self._count(claim)
        budget = max(8, self.max_length - NLI_SPECIAL_TOKENS - n_claim)
        evidence = select_evidence(claim, pair.evidence, self._count, budget)
        first, second = (claim, evidence) if self._claim_first else (evidence, claim)
        enc = self._tok.encode(first, second)
        return list(enc.ids), list(enc.type_ids)

    def _encode_causal(self, pair: Pair) -> tuple[list[int], list[int]]:
        claim = clip_claim(pair.claim) or "."
        budget = max(8, self.max_length - self._overhead - self._count(claim))
        evidence = select_evidence(claim, pair.evidence, self._count, budget)
        ev_ids = self._counter.encode(evidence, add_special_tokens=False).ids
        if len(ev_ids) > budget:  # one sentence longer than the budget: keep its start
            evidence = self._counter.decode(ev_ids[:budget])
        prompt = fill_prompt(self._template, claim, evidence)
        ids = list(self._counter.encode(prompt, add_special_tokens=False).ids)
        # last resort (a claim longer than the window): keep the end, where the answer goes
        ids = ids[-self.max_length :]
        return ids, [0] * len(ids)

    def _run(self, rows: list[tuple[list[int], list[int]]]) -> npt.NDArray[np.float64]:
        """Logits [n, 3] in VERDICTS order for one batch (padded to its longest row)."""
        width = max(len(ids) for ids, _ in rows)
        n = len(rows)
        input_ids = np.zeros((n, width), dtype=np.int64)
        types = np.zeros((n, width), dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.int64)
        for i, (ids, type_ids) in enumerate(rows):
            if self.kind == "nli":  # right padding
                input_ids[i, : len(ids)] = ids
                types[i, : len(ids)] = type_ids
                mask[i, : len(ids)] = 1
            else:  # left padding: the next-token position is the last column for every row
                input_ids[i, width - len(ids) :] = ids
                mask[i, width - len(ids) :] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = types
        if "position_ids" in self._inputs:
            feed["position_ids"] = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
        feed = {k: v for k, v in feed.items() if k in self._inputs}
        with self._lock:
            out = np.asarray(self._session.run([self._output], feed)[0], dtype=np.float64)
        if self.kind == "nli":
            return out[:, self._columns]
        return out.reshape(n, -1)[:, :3]

    def logits(self, pairs: Sequence[Pair]) -> npt.NDArray[np.float64]:
        encode = self._encode_nli if self.kind == "nli" else self._encode_causal
        rows = [encode(p) for p in pairs]
        out = np.zeros((len(rows), 3), dtype=np.float64)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([rows[i] for i in idx])
        return out

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        if not pairs:
            return []
        logits = self.logits(pairs)
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = z / z.sum(axis=1, keepdims=True)
        return [Probs(float(s), float(c), float(1.0 - s - c)) for s, c, _ in probs]
