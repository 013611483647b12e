"""Pack what one short accelerator run needs, and unpack what it gives back.

The device machine (see training/gpu_train.sh) receives only the working tree and the
folders named in ``carry`` (64 MiB in all), has no network, and returns at most 8 files of
16 MiB each. So, here:

    .venv/bin/python -m training.gpu_pack pack      # writes .gpu/ (ignored by git)

puts into ``.gpu/``: ``train.tar.xz`` and ``eval.tar.xz`` (``../shared/data``, read there,
never committed), ``minilm.tar.xz`` (the packaged all-MiniLM-L6-v2 backbone with fp16
weights: 44 MB instead of 87) and ``whl/`` (the pure-Python packages the device image lacks,
pinned as in requirements.lock). After the run:

    .venv/bin/python -m training.gpu_pack unpack FILES_AT [--out DIR]

joins the returned weight parts (``ce.fp16.safetensors.part-*``) into a loadable checkpoint
folder (default ``ce-gpu`` in groundproxy's cache, outside the repository) with the config
and tokenizer of the backbone, the manifest and the eval table, ready for
``training.cross_encoder --eval --onnx --ckpt DIR`` here or as the ``--backbone`` of a
further (CPU) plan.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from training.prepare import DEFAULT_DATA

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / ".gpu"
PART_BYTES = 15 * 1024 * 1024
# pure-Python (or cp312) wheels the device image lacks; versions as in requirements.lock
DEVICE_WHEELS = (
    "pydantic==2.14.4",
    "pydantic_core==2.50.5",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    "pysbd==0.3.4",
)
CONFIG_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


def _xz(src_parent: Path, name: str, dest: Path) -> None:
    with tarfile.open(dest, "w:xz", preset=6) as tar:
        tar.add(src_parent / name, arcname=name)


def pack(data: Path, out: Path = PACK) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    from groundproxy.retrieval.minilm import model_path

    if out.exists():
        shutil.rmtree(out)
    (out / "whl").mkdir(parents=True)
    for split in ("train", "eval"):
        _xz(data, split, out / f"{split}.tar.xz")
    backbone = model_path()
    with tempfile.TemporaryDirectory() as tmp:
        minilm = Path(tmp) / "minilm"
        minilm.mkdir()
        for name in CONFIG_FILES:
            if (backbone / name).is_file():
                shutil.copy2(backbone / name, minilm / name)
        weights = load_file(str(backbone / "model.safetensors"))
        save_file(
            {k: v.to(torch.float16) for k, v in weights.items()}, str(minilm / "model.safetensors")
        )
        _xz(Path(tmp), "minilm", out / "minilm.tar.xz")
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
            "--python-version", "3.12", "--implementation", "cp",
            "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "manylinux2014_x86_64", "-d", str(out / "whl"), *DEVICE_WHEELS,
        ],
        check=True,
    )  # fmt: skip
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: {size / 2**20:.1f} MiB (the device limit is 64 MiB with the tree)")
    return out


def split_weights(model_dir: Path, dest: Path) -> list[Path]:
    """fp16 weights of the checkpoint in ``model_dir`` as ``PART_BYTES`` parts in ``dest``."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(str(model_dir / "model.safetensors"))
    whole = dest / "ce.fp16.safetensors"
    save_file({k: v.to(torch.float16).contiguous() for k, v in weights.items()}, str(whole))
    data = whole.read_bytes()
    whole.unlink()
    parts = []
    for i in range(0, len(data), PART_BYTES):
        part = dest / f"ce.fp16.safetensors.part-{i // PART_BYTES:02d}"
        part.write_bytes(data[i : i + PART_BYTES])
        parts.append(part)
    return parts


def unpack(files_at: Path, out: Path) -> Path:
    import torch
    from safetensors.torch import load, save_file

    from groundproxy.retrieval.minilm import model_path

    parts = sorted(files_at.rglob("ce.fp16.safetensors.part-*"))
    if not parts:
        raise SystemExit(f"no ce.fp16.safetensors.part-* under {files_at}")
    weights = load(b"".join(p.read_bytes() for p in parts))
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.to(torch.float32) for k, v in weights.items()}, str(out / "model.safetensors"))
    backbone = model_path()
    for name in CONFIG_FILES[1:]:
        if (backbone / name).is_file():
            shutil.copy2(backbone / name, out / name)
    for name in ("config.json", "ce_manifest.json", "ce_eval.json", "train.log"):
        found = next(iter(files_at.rglob(name)), None)
        if found is not None:
            shutil.copy2(found, out / name)
    print(f"checkpoint: {out}")
    return out


def main(argv: list[str] | None = None) -> None:
    from training.cross_encoder import default_checkpoint

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="write .gpu/ for training/gpu_train.sh")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    s = sub.add_parser("split", help="(on the device) fp16 weight parts of a checkpoint")
    s.add_argument("ckpt", type=Path)
    s.add_argument("dest", type=Path)
    u = sub.add_parser("unpack", help="a checkpoint folder from the files a run gave back")
    u.add_argument("files_at", type=Path)
    u.add_argument("--out", type=Path, default=default_checkpoint().parent / "ce-gpu")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.cmd == "pack":
        pack(args.data)
    elif args.cmd == "split":
        for part in split_weights(args.ckpt, args.dest):
            print(part)
    else:
        unpack(args.files_at, args.out)


if __name__ == "__main__":
    main()
