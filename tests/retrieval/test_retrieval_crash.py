"""SIGKILL a writer process at random moments: the index must always open, consistent.

The child commits generation after generation; in version v every document holds the
text for v and doc "extra" exists only in even versions. After each kill the live
version must be complete: exactly that version's documents and texts, chunks that match
the document text, and vectors that find them.
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
from groundproxy.retrieval.tenant_index import IndexWriter, TenantIndex

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
N_DOCS = 8
CHILD = """
import sys
from pathlib import Path
from groundproxy.retrieval.embedder import load_embedder
from groundproxy.retrieval.tenant_index import IndexWriter
sys.path.insert(0, sys.argv[2])
from tests.retrieval.test_retrieval_crash import expected_docs
data = Path(sys.argv[1])
embedder = load_embedder("groundproxy.testing.embedders:HashingEmbedder")
print("started", flush=True)
while True:
    with IndexWriter(data, "acme", embedder) as writer:
        version = writer.base_version + 1
        want = expected_docs(version)
        for doc_id, text in want.items():
            writer.upsert(doc_id, text)
        if "extra" not in want:
            writer.delete("extra")
        writer.commit()
"""


def expected_docs(version: int) -> dict[str, str]:
    """The exact documents of a given index version."""
    docs = {
        f"doc{i}": " ".join(
            f"Document {i} sentence {s} written for version {version}." for s in range(4 + i)
        )
        for i in range(N_DOCS)
    }
    if version % 2 == 0:
        docs["extra"] = f"The extra document of version {version}."
    return docs


def _check_consistent(data: Path, embedder: Embedder) -> int:
    index = TenantIndex.open(data, "acme")
    want = expected_docs(index.version)
    assert [d.doc_id for d in index.documents()] == sorted(want)
    n_chunks = 0
    for doc_id, text in want.items():
        doc = index.get_document(doc_id)
        assert doc is not None and doc.text == text
        for chunk in doc.chunks:
            assert text[chunk.start : chunk.end] == chunk.text
        n_chunks += len(doc.chunks)
    assert index.count == n_chunks
    hits = index.search(embedder.encode([want["doc3"]]), 3, 0.0)[0]
    assert hits and hits[0].doc == "doc3"
    index.close()
    return index.version


def test_sigkill_at_random_points(tmp_path: Path, hashing: Embedder) -> None:
    with IndexWriter(tmp_path, "acme", hashing) as writer:
        for doc_id, text in expected_docs(1).items():
            writer.upsert(doc_id, text)
        assert writer.commit() == 1
    rng = random.Random(1234)
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    versions = [1]
    for _ in range(5):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path), str(ROOT)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "started"
            time.sleep(rng.uniform(0.05, 0.8))
        finally:
            child.send_signal(signal.SIGKILL)
            _, stderr = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL, stderr
        versions.append(_check_consistent(tmp_path, hashing))
    assert versions == sorted(versions) and versions[-1] > 1  # it progressed
    # A writer after the crashes works and clears the crashed writers' temp dirs.
    with IndexWriter(tmp_path, "acme", hashing) as writer:
        version = writer.base_version + 1
        for doc_id, text in expected_docs(version).items():
            writer.upsert(doc_id, text)
        if version % 2:
            writer.delete("extra")
        assert writer.commit() == version
    assert _check_consistent(tmp_path, hashing) == version
    leftovers = [p.name for p in (tmp_path / "acme").iterdir() if p.name.startswith(".tmp-")]
    assert leftovers == []
