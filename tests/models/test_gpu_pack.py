"""What a device run hands back (weights cut into ≤ 15 MiB fp16 parts, the limit on files
returned) joins back into a checkpoint that loads and scores like the one trained there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.models.tiny_hf import save_tiny_nli
from training import gpu_pack


def test_split_then_unpack_gives_back_the_same_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    ckpt = save_tiny_nli(tmp_path / "ckpt")
    (ckpt / "ce_manifest.json").write_text('{"threshold": 0.5}', encoding="utf-8")
    returned = tmp_path / "out"
    returned.mkdir()
    monkeypatch.setattr(gpu_pack, "PART_BYTES", 200_000)  # several parts from a tiny model
    parts = gpu_pack.split_weights(ckpt, returned)
    assert len(parts) >= 2 and all(p.stat().st_size <= 200_000 for p in parts)
    for name in ("config.json", "ce_manifest.json"):
        (returned / name).write_bytes((ckpt / name).read_bytes())

    back = gpu_pack.unpack(returned, tmp_path / "back")
    assert (back / "ce_manifest.json").read_text(encoding="utf-8") == '{"threshold": 0.5}'
    tok = AutoTokenizer.from_pretrained(str(back))  # type: ignore[no-untyped-call]
    batch = tok("The cat sat.", "A cat was sitting.", return_tensors="pt")
    with torch.inference_mode():
        a = AutoModelForSequenceClassification.from_pretrained(str(ckpt))(**batch).logits
        b = AutoModelForSequenceClassification.from_pretrained(str(back))(**batch).logits
    assert torch.allclose(a, b, atol=0.05)  # fp16 round trip
    assert not torch.allclose(b[0, 0], b[0, 1])


def test_unpack_without_parts_says_so(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"no ce\.fp16\.safetensors\.part"):
        gpu_pack.unpack(tmp_path, tmp_path / "back")
