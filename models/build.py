"""``groundproxy models build``: a Hugging Face model → a quantized ONNX verifier on disk.

Two kinds of source model (a local folder, a hub id already in the local HF cache, or a
``.gguf`` file; nothing is downloaded):

``nli``        a sequence-classification model whose ``id2label`` names entailment /
               contradiction / neutral; P(verdict) is the softmax of its logits.
``causal-lm``  a causal LM asked, in one prompt, whether the evidence supports the claim
               (seed 000's SLM verifier); P(verdict) is the softmax over the next-token
               logits of the three label words' first tokens. The exported graph is cut
               to those three logits at the last position (left padding), so the
               vocabulary projection costs 3 columns instead of the whole vocabulary.

Export is optimum's (``onnx_export_from_model``), quantization onnxruntime's dynamic int8
(the ONNX steps and the parity check: models.build_onnx).
The result ``<models_dir>/<name>/`` holds ``model.onnx`` (fp32), ``model.int8.onnx``, the
tokenizer and ``build.json`` (kind, source, label mapping, prompt, max_length, sha256s,
parity figures). It is written to a temporary folder and renamed into place: a failed
build leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from groundproxy.errors import BadRequestError, GroundproxyError, ModelLoadError
from groundproxy.guards.types import VERDICTS, Verdict
from groundproxy.models.build_onnx import (
    FP32_FILE,
    INT8_FILE,
    Kind,
    cut_to_label_logits,
    export,
    parity,
    quantize,
    torch_probs,
)
from groundproxy.models.build_onnx import PROBES as PROBES  # re-export (tests, bench)
from groundproxy.models.built_verifier import BUILD_FILE
from groundproxy.retrieval.fsutil import sha256_file

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
DEFAULT_MAX_LENGTH: dict[str, int] = {"nli": 128, "causal-lm": 256}

# id2label names (lower case, '_' and '-' read as spaces) → our verdicts
_LABEL_NAMES: dict[str, Verdict] = {
    "entailment": "supported",
    "entail": "supported",
    "entailed": "supported",
    "supported": "supported",
    "supports": "supported",
    "contradiction": "contradicted",
    "contradict": "contradicted",
    "contradicted": "contradicted",
    "refutes": "contradicted",
    "refuted": "contradicted",
    "neutral": "unverifiable",
    "unverifiable": "unverifiable",
    "not enough info": "unverifiable",
    "nei": "unverifiable",
}
LABEL_WORDS: dict[Verdict, str] = {
    "supported": "Supported",
    "contradicted": "Contradicted",
    "unverifiable": "Unverifiable",
}
PROMPT = (
    "Read the evidence, then decide whether it supports the claim.\n\n"
    "Evidence: {evidence}\n\n"
    "Claim: {claim}\n\n"
    "Answer with one word: Supported if the evidence says the claim is true, "
    "Contradicted if the evidence says the claim is false, Unverifiable if the evidence "
    "does not say."
)


@dataclass(frozen=True)
class Source:
    """Where the model comes from: a folder (and a GGUF file in it), as the user named it."""

    spec: str
    path: Path
    gguf_file: str | None = None


def resolve_source(spec: str) -> Source:
    """A local folder / ``.gguf`` file, else a hub id found in the local cache only."""
    path = Path(spec).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise BadRequestError(f"{spec} is a file but not a .gguf model; pass a folder")
        return Source(spec, path.resolve().parent, path.name)
    if path.is_dir():
        return Source(spec, path.resolve())
    if path.is_absolute() or spec.startswith(".") or spec.count("/") > 1:
        raise BadRequestError(f"model source {spec} does not exist")
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(spec, local_files_only=True)
    except Exception as exc:  # the hub raises several types; all mean "not in the cache"
        raise BadRequestError(
            f"model '{spec}' is neither a local folder nor in the local Hugging Face cache "
            "(groundproxy never downloads: put the model in a folder or the HF cache first)"
        ) from exc
    return Source(spec, Path(local))


def verdict_of_label(label: str) -> Verdict | None:
    return _LABEL_NAMES.get(re.sub(r"[_-]+", " ", label.strip().lower()))


def nli_labels(id2label: dict[Any, str]) -> dict[str, Verdict]:
    """Output index (as a string) → verdict; every verdict exactly once, or an error."""
    mapping: dict[str, Verdict] = {}
    for idx, label in id2label.items():
        verdict = verdict_of_label(str(label))
        if verdict is not None:
            mapping[str(idx)] = verdict
    if sorted(mapping.values()) != sorted(VERDICTS):
        raise BadRequestError(
            f"id2label {dict(id2label)} does not name entailment, contradiction and neutral "
            "once each; only three-label NLI models can be built"
        )
    return mapping


def _detect_kind(config: Any, source: Source) -> Kind:
    archs = [str(a) for a in (getattr(config, "architectures", None) or [])]
    if any(a.endswith("ForSequenceClassification") for a in archs):
        return "nli"
    if source.gguf_file is not None or any(a.endswith("ForCausalLM") for a in archs):
        return "causal-lm"
    raise BadRequestError(
        f"cannot tell the model kind from architectures {archs}; pass --kind nli|causal-lm"
    )


def _label_token_ids(tokenizer: Any, prefix: str) -> dict[str, dict[str, Any]]:
    words: dict[str, dict[str, Any]] = {}
    for verdict, word in LABEL_WORDS.items():
        ids = tokenizer.encode(prefix + word, add_special_tokens=False)
        if not ids:
            raise BadRequestError(f"the tokenizer gives no token for the label word {word!r}")
        words[verdict] = {"word": prefix + word, "token_id": int(ids[0])}
    if len({w["token_id"] for w in words.values()}) != 3:
        raise BadRequestError(
            f"the label words' first tokens are not distinct ({words}); "
            "this tokenizer cannot tell the three verdicts apart"
        )
    return words


def causal_prompt(tokenizer: Any) -> tuple[str, str]:
    """The prompt template ({claim}, {evidence}) and the label-word prefix."""
    if getattr(tokenizer, "chat_template", None):
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": PROMPT}], tokenize=False, add_generation_prompt=True
        )
        return str(rendered), ""
    return PROMPT + "\nAnswer:", " "


def _load(source: Source, kind: Kind) -> tuple[Any, Any]:
    """The torch model (fp32, eval mode) and its tokenizer."""
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    kwargs: dict[str, Any] = {}
    if source.gguf_file is not None:
        kwargs["gguf_file"] = source.gguf_file
    auto = AutoModelForSequenceClassification if kind == "nli" else AutoModelForCausalLM
    tokenizer = AutoTokenizer.from_pretrained(  # type: ignore[no-untyped-call]
        str(source.path), **kwargs
    )
    if not getattr(tokenizer, "is_fast", False):
        raise BadRequestError("the model has no fast tokenizer (tokenizer.json); cannot build")
    model = auto.from_pretrained(str(source.path), dtype=torch.float32, **kwargs)
    return model.eval(), tokenizer


@dataclass(frozen=True)
class BuildSpec:
    """How to read the source model (``groundproxy models build`` flags): ``kind``
    (``auto``: from its config), ``max_length`` (None: 128 NLI / 256 causal) and
    ``pair_order`` of an NLI model (``auto``: probed)."""

    kind: Literal["auto", "nli", "causal-lm"] = "auto"
    max_length: int | None = None
    pair_order: Literal["auto", "evidence-claim", "claim-evidence"] = "auto"


def build_model(
    source_spec: str,
    name: str,
    models_dir: Path,
    spec: BuildSpec | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Export, quantize, check and register ``source_spec`` as ``<models_dir>/<name>``;
    returns the written ``build.json`` content."""
    spec = spec if spec is not None else BuildSpec()
    from groundproxy.models.registry import BUILTIN_NAMES

    if not NAME_RE.match(name) or name in BUILTIN_NAMES or "@" in name:
        raise BadRequestError(
            f"invalid model name '{name}': 1-63 chars of a-z, 0-9, '.', '_' or '-', not one "
            f"of the built-in verifiers ({', '.join(sorted(BUILTIN_NAMES))})"
        )
    dest = models_dir / name
    if dest.exists() and not force:
        raise BadRequestError(f"model '{name}' already exists in {models_dir} (use --force)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    source = resolve_source(source_spec)
    started = time.perf_counter()
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = models_dir / f".{name}.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        meta = _build_into(tmp, source, name, spec.kind, spec.max_length, spec.pair_order)
        meta["build_s"] = round(time.perf_counter() - started, 1)
        (tmp / BUILD_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        if dest.exists():
            old = models_dir / f".{name}.old-{os.getpid()}"
            dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(dest)
    except GroundproxyError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, Exception):
            raise ModelLoadError(f"building '{name}' from {source_spec} failed: {exc}") from exc
        raise
    return meta


def _build_into(
    out: Path, source: Source, name: str, kind: str, max_length: int | None, pair_order: str
) -> dict[str, Any]:
    from transformers import AutoConfig

    kwargs = {"gguf_file": source.gguf_file} if source.gguf_file else {}
    config = AutoConfig.from_pretrained(str(source.path), **kwargs)
    real_kind: Kind = _detect_kind(config, source) if kind == "auto" else kind  # type: ignore[assignment]
    model, tokenizer = _load(source, real_kind)
    meta: dict[str, Any] = {
        "format": 1,
        "name": name,
        "kind": real_kind,
        "source": source.spec
        if not Path(source.spec).exists()
        else str(Path(source.spec).resolve()),
        "architecture": type(model).__name__,
        "max_length": int(max_length or DEFAULT_MAX_LENGTH[real_kind]),
        "files": {"fp32": FP32_FILE, "int8": INT8_FILE},
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if real_kind == "nli":
        meta["id2label"] = {str(k): str(v) for k, v in model.config.id2label.items()}
        meta["labels"] = nli_labels(model.config.id2label)
        ce_manifest = source.path / "ce_manifest.json"
        if pair_order == "auto":
            # our cross-encoder (training/cross_encoder.py) reads claim first
            pair_order = "claim-evidence" if ce_manifest.is_file() else "evidence-claim"
        meta["pair_order"] = pair_order
        if ce_manifest.is_file():  # its decision bars, chosen on TRAIN data
            manifest = json.loads(ce_manifest.read_text(encoding="utf-8"))
            for key in ("threshold", "contradiction_min"):
                if isinstance(manifest.get(key), int | float):
                    meta[key] = float(manifest[key])
    else:
        template, prefix = causal_prompt(tokenizer)
        meta["prompt"] = template
        meta["label_words"] = _label_token_ids(tokenizer, prefix)
    tokenizer.save_pretrained(str(out))
    export(model, real_kind, out)
    if real_kind == "causal-lm":
        cut_to_label_logits(
            out / FP32_FILE, [int(meta["label_words"][v]["token_id"]) for v in VERDICTS]
        )
    quantize(out)
    meta["sha256"] = {f: sha256_file(out / f) for f in (FP32_FILE, INT8_FILE)}
    meta["bytes"] = {f: (out / f).stat().st_size for f in (FP32_FILE, INT8_FILE)}
    (out / BUILD_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    meta["parity"] = parity(out, torch_probs(model, tokenizer, meta))
    return meta


def format_report(meta: dict[str, Any], dest: Path) -> str:
    """What ``groundproxy models build`` prints."""
    par = meta["parity"]
    lines = [
        f"built '{meta['name']}' ({meta['kind']}, {meta['architecture']}) from {meta['source']} "
        f"in {meta['build_s']} s → {dest}",
    ]
    for f in (FP32_FILE, INT8_FILE):
        size = meta["bytes"][f] / 1e6
        lines.append(f"  {f:<18}{size:>9.1f} MB  sha256 {meta['sha256'][f][:16]}…")
    lines.append(
        f"  parity on {len(par['probes'])} probe pairs: int8 vs fp32 max |Δp| "
        f"{par['int8_vs_fp32_max_abs']:.4f}; fp32 ONNX vs torch {par['torch_vs_fp32_max_abs']:.2e}"
    )
    for probe in par["probes"]:
        p = probe["int8"]
        lines.append(
            f"  probe ({probe['expected']:>12}) → {probe['verdict_int8']:<12} "
            f"S={p['supported']:.3f} C={p['contradicted']:.3f} U={p['unverifiable']:.3f}  "
            f"{probe['claim']}"
        )
    lines.append(f"  use it in a policy: verifier: {{model: {meta['name']}}}")
    return "\n".join(lines)
