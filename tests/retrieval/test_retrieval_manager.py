"""IndexManager: lazy open, LRU, following CURRENT written by another process, preload."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from groundproxy.errors import IndexStoreError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.ingest import ingest_texts
from groundproxy.retrieval.tenant_index import IndexManager

ROOT = Path(__file__).resolve().parents[2]
INGEST_SCRIPT = """
import sys
from pathlib import Path
from groundproxy.retrieval.embedder import load_embedder
from groundproxy.retrieval.ingest import ingest_texts
result = ingest_texts(Path(sys.argv[1]), "acme", [("new.txt", "Freshly ingested zebra facts.")],
                      load_embedder("groundproxy.testing.embedders:HashingEmbedder"))
print(result.version)
"""


def test_sees_ingest_from_another_process(tmp_path: Path, hashing: Embedder) -> None:
    ingest_texts(tmp_path, "acme", [("old.txt", "Old content about apples.")], hashing)
    manager = IndexManager(tmp_path, hashing, check_interval=0.2)
    first = manager.get("acme")
    assert first.version == 1 and manager.get("acme") is first  # cached
    proc = subprocess.run(
        [sys.executable, "-c", INGEST_SCRIPT, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"
    time.sleep(0.3)
    current = manager.get("acme")
    assert current.version == 2 and current is not first
    hits = current.search(hashing.encode(["zebra facts"]), 1, 0.1)[0]
    assert hits and hits[0].doc == "new.txt"
    assert first.get_document("old.txt") is not None  # the old snapshot still works
    manager.close()


def test_invalidate_and_refresh(tmp_path: Path, hashing: Embedder) -> None:
    manager = IndexManager(tmp_path, hashing)  # default 0.5 s interval
    assert manager.get("acme").version == 0  # no index yet: empty
    ingest_texts(tmp_path, "acme", [("a.txt", "Alpha.")], hashing)
    manager.invalidate("acme")
    assert manager.get("acme").version == 1
    ingest_texts(tmp_path, "acme", [("b.txt", "Beta.")], hashing)
    assert manager.refresh("acme").version == 2


def test_lru_eviction(tmp_path: Path, hashing: Embedder) -> None:
    for tenant in ("t1", "t2", "t3"):
        ingest_texts(tmp_path, tenant, [("a.txt", f"Document of {tenant}.")], hashing)
    manager = IndexManager(tmp_path, hashing, max_loaded=2)
    manager.get("t1")
    manager.get("t2")
    manager.get("t1")
    manager.get("t3")
    assert manager.loaded() == ["t1", "t3"]


def test_preload_collects_errors(tmp_path: Path, hashing: Embedder) -> None:
    ingest_texts(tmp_path, "good", [("a.txt", "Fine.")], hashing)
    ingest_texts(tmp_path, "bad", [("a.txt", "Soon broken.")], hashing)
    (tmp_path / "bad" / "CURRENT").write_text("garbage")
    manager = IndexManager(tmp_path, hashing)
    errors = manager.preload(["good", "bad", "../evil", "fresh"])
    assert len(errors) == 2
    assert any("bad" in e and "CURRENT" in e for e in errors)
    assert any("evil" in e for e in errors)
    assert manager.get("good").version == 1 and manager.get("fresh").version == 0
    with pytest.raises(IndexStoreError):
        manager.get("bad")


def test_concurrent_gets_and_searches(tmp_path: Path, hashing: Embedder) -> None:
    docs = [(f"d{i}.txt", f"Document {i} talks about topic {i % 7}.") for i in range(60)]
    ingest_texts(tmp_path, "acme", docs, hashing)
    manager = IndexManager(tmp_path, hashing, check_interval=0.0)
    vectors = hashing.encode([f"topic {i}" for i in range(7)])
    failures: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(30):
                results = manager.get("acme").search(vectors, 5, 0.0)
                assert len(results) == 7 and all(len(r) == 5 for r in results)
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    ingest_texts(tmp_path, "acme", [("extra.txt", "More about topic 3.")], hashing)
    for t in threads:
        t.join()
    assert not failures
    assert manager.get("acme").version == 2
