"""SIGKILL the real ``groundproxy ingest`` CLI (a subprocess) at 20 random points.

Each round rewrites a random third of a folder of documents and adds one, then runs
``groundproxy ingest`` on the folder and kills it at a random moment of its ingest (from
its first progress output to a little past its usual end). After every kill the index
must open, and be exactly the previous version or exactly the new one: every document is
its old text or its new text, never a mix, never a torn chunk.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from groundproxy.guards.types import Embedder
from groundproxy.retrieval.readers import read_documents
from groundproxy.retrieval.tenant_index import IndexWriter, TenantIndex
from groundproxy.testing.embedders import HASHING

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KILLS = 20
N_DOCS = 250
TENANT = "crashy"


def _text(i: int, round_: int) -> str:
    return (
        f"Document {i} revision {round_} covers item {i * 7 + round_}. "
        f"Its second sentence says the price is {round_ * 3 + i} dollars. "
        f"A third sentence closes document {i} of revision {round_}."
    )


def _cli(data: Path, src: Path) -> subprocess.Popen[bytes]:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "GROUNDPROXY_EMBEDDER": HASHING, "PYTHONPATH": path}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groundproxy.proxy",
            "ingest",
            "--data",
            str(data),
            "--tenant",
            TENANT,
            str(src),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _expected(src: Path) -> dict[str, str]:
    return {d.doc_id: d.text for d in read_documents([src])}


def _check(data: Path, embedder: Embedder, want: dict[str, str]) -> None:
    index = TenantIndex.open(data, TENANT, embedder=embedder)
    try:
        docs = {d.doc_id for d in index.documents()}
        assert docs == set(want)
        n_chunks = 0
        for doc_id, text in want.items():
            doc = index.get_document(doc_id)
            assert doc is not None and doc.text == text, doc_id
            for chunk in doc.chunks:
                assert text[chunk.start : chunk.end] == chunk.text
            n_chunks += len(doc.chunks)
        assert index.count == n_chunks
        probe = sorted(want)[len(want) // 2]
        hits = index.search(embedder.encode([want[probe]]), 3, 0.0)[0]
        assert hits and hits[0].doc == probe
    finally:
        index.close()


def test_sigkill_ingest_cli_at_20_random_points(tmp_path: Path, hashing: Embedder) -> None:
    rng = random.Random(20)
    src, data = tmp_path / "docs", tmp_path / "data"
    src.mkdir()
    rounds = dict.fromkeys(range(N_DOCS), 0)
    for i in rounds:
        (src / f"doc{i:04d}.txt").write_text(_text(i, 0), encoding="utf-8")
    # A first, complete run: version 1, and how long the ingest phase of a run takes.
    proc = _cli(data, src)
    assert proc.stderr is not None
    proc.stderr.read(1)
    t0 = time.perf_counter()
    proc.wait(timeout=120)
    span = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr.read().decode(errors="replace")
    old = _expected(src)
    _check(data, hashing, old)
    version = 1

    outcomes = {"old": 0, "new": 0}
    started = time.perf_counter()
    for round_ in range(1, KILLS + 1):
        for i in rng.sample(sorted(rounds), N_DOCS // 3):
            rounds[i] = round_
            (src / f"doc{i:04d}.txt").write_text(_text(i, round_), encoding="utf-8")
        extra = N_DOCS + round_
        (src / f"doc{extra:04d}.txt").write_text(_text(extra, round_), encoding="utf-8")
        new = _expected(src)
        proc = _cli(data, src)
        try:
            assert proc.stderr is not None
            assert proc.stderr.read(1), "the CLI died before its first progress output"
            time.sleep(rng.uniform(0.0, span * 1.3))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stderr.close() if proc.stderr else None
        now = TenantIndex.open(data, TENANT).version
        assert now in (version, version + 1), (now, version)
        if now == version:
            outcomes["old"] += 1
            _check(data, hashing, old)
        else:
            outcomes["new"] += 1
            _check(data, hashing, new)
            old, version = new, now
    elapsed = time.perf_counter() - started
    print(f"{KILLS} kills in {elapsed:.1f} s: {outcomes}, ingest span {span:.2f} s")
    assert outcomes["old"] >= 1, "no kill landed before a commit"
    # After the crashes an ingest still works and clears the crashed runs' temp dirs.
    proc = _cli(data, src)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    _check(data, hashing, _expected(src))
    with IndexWriter(data, TENANT, hashing) as writer:
        writer.commit()
    leftovers = [p.name for p in (data / TENANT).iterdir() if p.name.startswith(".tmp-")]
    assert leftovers == []
