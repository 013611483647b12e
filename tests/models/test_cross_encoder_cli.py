"""The cross-encoder trainer's checkpoint folder is an option; its default lies in
groundproxy's cache, outside the repository (it used to be a hard-coded /work path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.cross_encoder import build_parser, default_checkpoint

REPO = Path(__file__).resolve().parents[2]


def test_default_checkpoint_is_in_the_cache_outside_the_repo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GROUNDPROXY_CACHE", str(tmp_path / "cache"))
    args = build_parser().parse_args([])
    assert args.out == args.ckpt == default_checkpoint() == tmp_path / "cache" / "ce-ckpt"
    monkeypatch.delenv("GROUNDPROXY_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build_parser().parse_args([]).out == tmp_path / "xdg" / "groundproxy" / "ce-ckpt"


def test_checkpoint_folders_are_options(tmp_path: Path) -> None:
    args = build_parser().parse_args(["--out", str(tmp_path / "a"), "--ckpt", str(tmp_path / "b")])
    assert (args.out, args.ckpt) == (tmp_path / "a", tmp_path / "b")
    assert not default_checkpoint().resolve().is_relative_to(REPO.resolve())
