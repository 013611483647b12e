"""Issue 14, items 3 (symlinks), 9 (JSONL ids) and 11 (skip errors, big files) through the
real CLI: ``python -m groundproxy.proxy ingest ...``."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.conftest import run_cli

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

SENTENCE = "The Acme robot has a warranty of 12 months from the date of purchase. "


def _ingest(data: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    done = run_cli("ingest", "--data", str(data), "--tenant", "t1", *args)
    out = json.loads(done.stdout) if done.returncode == 0 else {}
    return done.returncode, out, done.stderr


def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("The root password is hunter2.", encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(SENTENCE, encoding="utf-8")
    (docs / "leak.md").symlink_to(outside / "secret.md")
    (docs / "inside.md").symlink_to(docs / "a.md")  # inside the folder: fine
    code, _, err = _ingest(tmp_path / "data", str(docs), "--no-progress")
    assert code != 0 and "leak.md" in err and "--follow-symlinks" in err, err
    code, out, err = _ingest(tmp_path / "data", str(docs), "--no-progress", "--skip-errors")
    assert code == 0, err
    assert out["added"] == 2 and any("leak.md" in s for s in out["skipped"]), out
    code, out, _ = _ingest(tmp_path / "data", str(docs), "--no-progress", "--follow-symlinks")
    assert code == 0 and out["added"] == 1, out


def test_jsonl_long_ids_and_repeated_ids_are_errors_naming_the_rows(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    tail = "x" * 260
    rows = [{"id": f"a{tail}", "text": "first"}, {"id": f"b{tail}", "text": "second"}]
    (docs / "long.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    code, _, err = _ingest(tmp_path / "data", str(docs / "long.jsonl"), "--no-progress")
    assert code != 0 and "long.jsonl:1" in err and "255" in err, err
    rows = [{"id": "r1", "text": "one"}, {"id": "r2", "text": "two"}, {"id": "r1", "text": "3"}]
    (docs / "dup.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    code, _, err = _ingest(tmp_path / "data", str(docs / "dup.jsonl"), "--no-progress")
    assert code != 0 and "dup.jsonl:1" in err and "dup.jsonl:3" in err, err


def test_skip_errors_skips_and_lists_each_bad_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text(SENTENCE, encoding="utf-8")
    (docs / "broken.jsonl").write_text('{"id": "ok", "text": "fine"}\n{not json\n', "utf-8")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a pdf")
    code, _, err = _ingest(tmp_path / "data", str(docs), "--no-progress")
    assert code != 0 and "--skip-errors" in err, err
    code, out, err = _ingest(tmp_path / "data", str(docs), "--no-progress", "--skip-errors")
    assert code == 0, err
    assert out["added"] == 1, out  # the good file only: no row of a skipped file
    skipped = out["skipped"]
    assert isinstance(skipped, list) and len(skipped) == 2, skipped
    assert "broken.jsonl" in err and "broken.pdf" in err


@pytest.mark.slow  # ~30 s: 5 MB through chunking, embedding and a commit
def test_a_big_file_streams_with_a_chunk_progress_bar(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    big = (SENTENCE * 2000 + "\n\n") * 36  # ~5 MB
    (docs / "big.txt").write_text(big, encoding="utf-8")
    assert len(big) > 5_000_000
    started = time.monotonic()
    code, out, err = _ingest(tmp_path / "data", str(docs / "big.txt"))
    seconds = time.monotonic() - started
    assert code == 0, err[-2000:]
    assert seconds < 60, seconds
    counts = [(int(a), int(b)) for a, b in re.findall(r"(\d+)/(\d+) \[", err)]
    chunks = int(str(out["chunks_added"]))
    assert counts and counts[-1] == (chunks, chunks), counts[-3:]
    assert "chunk" in err
    assert "<" in err  # tqdm's ETA: [elapsed<remaining]
