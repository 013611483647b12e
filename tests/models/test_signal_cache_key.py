"""Bench hygiene (issue 42 item 6): the signal cache of a labelled file is keyed by the
file's content, not its name — a held-out file named like an eval file never reads the eval
file's cached signals (it did: the cache was ``<name>-<seed>-<code>.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.kshot import extract
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from training.signal_cache import content_key

ROW = {"context": "The warranty is 12 months.", "query": "How long is the warranty?"}


def _write(folder: Path, answers: list[tuple[str, int]]) -> Path:
    folder.mkdir()
    path = folder / "halueval-qa.jsonl"  # the same name in both folders
    rows = [{**ROW, "id": f"r{i}", "response": a, "label_hallucinated": y}
            for i, (a, y) in enumerate(answers)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_file_named_like_another_never_reads_its_signals(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _write(tmp_path / "eval", [("The warranty is 12 months.", 0), ("It is 48 months.", 1)])
    other = _write(tmp_path / "heldout", [("The warranty lasts a year.", 0), ("Ten years.", 1)])
    assert content_key(first) != content_key(other) and first.name == other.name
    with build_guard(Settings(data=tmp_path / "data", batch_window_ms=0)) as guard:
        rows, scored, _ = extract(first, 2, lambda: guard, cache)  # the real serve path
    assert len(rows) == len(scored) == 2
    # cached rows only (no guard): the same file reads its own signals back ...
    again, cached, _ = extract(first, 2, None, cache)
    assert cached == scored and again == rows
    # ... a file with the same name and other rows reads none of them
    rows2, scored2, _ = extract(other, 2, None, cache)
    assert rows2 == [] and scored2 == []
