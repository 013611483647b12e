"""Failure paths: aborted writers, corrupt or missing files, embedder mismatch, locks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from groundproxy.errors import IndexStoreError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.chunk_store import ChunkStore
from groundproxy.retrieval.ingest import ingest_texts
from groundproxy.retrieval.tenant_index import IndexWriter, TenantIndex
from groundproxy.testing.embedders import HashingEmbedder
from tests.retrieval.helpers import CountingEmbedder

DOCS = [
    ("a.txt", "Alpha document about apples. It has two sentences."),
    ("b/c.md", "Beta document about bananas and boats."),
]


def _live_gen(data: Path, tenant: str) -> Path:
    pointer = json.loads((data / tenant / "CURRENT").read_text())
    return data / tenant / str(pointer["generation"])


def _text(index: TenantIndex, doc_id: str) -> str:
    doc = index.get_document(doc_id)
    assert doc is not None
    return doc.text


def _seed(data: Path, embedder: Embedder, tenant: str = "t") -> TenantIndex:
    ingest_texts(data, tenant, DOCS, embedder)
    return TenantIndex.open(data, tenant)


def test_exception_inside_writer_keeps_previous_version(tmp_path: Path, hashing: Embedder) -> None:
    before = _seed(tmp_path, hashing)
    with pytest.raises(RuntimeError, match="boom"), IndexWriter(tmp_path, "t", hashing) as writer:
        writer.upsert("a.txt", "Completely new text.")
        writer.delete("b/c.md")
        writer.upsert("new.txt", "Another document.")
        raise RuntimeError("boom")
    after = TenantIndex.open(tmp_path, "t")
    assert after.version == before.version == 1
    assert [d.doc_id for d in after.documents()] == ["a.txt", "b/c.md"]
    assert _text(after, "a.txt") == DOCS[0][1]
    assert not [p for p in (tmp_path / "t").iterdir() if p.name.startswith(".tmp-")]
    with IndexWriter(tmp_path, "t", hashing, lock_timeout=1) as writer:  # lock was released
        writer.delete("a.txt")
        assert writer.commit() == 2


def test_leaving_without_commit_discards(tmp_path: Path, hashing: Embedder) -> None:
    _seed(tmp_path, hashing)
    with IndexWriter(tmp_path, "t", hashing) as writer:
        assert writer.upsert("x.txt", "Uncommitted.") == "added"
    index = TenantIndex.open(tmp_path, "t")
    assert index.version == 1 and index.get_document("x.txt") is None


def test_unchanged_documents_are_not_embedded_again(tmp_path: Path) -> None:
    counting = CountingEmbedder()
    first = ingest_texts(tmp_path, "t", DOCS, counting)
    encoded = counting.texts_encoded
    assert encoded == first.chunks_added > 0
    second = ingest_texts(tmp_path, "t", DOCS, counting)
    assert (second.unchanged, second.chunks_added, second.version) == (2, 0, 1)
    assert counting.texts_encoded == encoded


def test_replacing_in_the_same_writer(tmp_path: Path, hashing: Embedder) -> None:
    with IndexWriter(tmp_path, "t", hashing) as writer:
        assert writer.upsert("a.txt", "First version.") == "added"
        assert writer.upsert("a.txt", "Second version.") == "replaced"
        assert writer.upsert("a.txt", "Second version.") == "unchanged"
        assert writer.delete("a.txt") is True
        assert writer.upsert("a.txt", "Third version.") == "added"
        assert writer.commit() == 1
    index = TenantIndex.open(tmp_path, "t")
    assert index.count == 1 and _text(index, "a.txt") == "Third version."


@pytest.mark.parametrize("victim", ["index.bin", "chunks.sqlite", "meta.json"])
def test_corrupt_files_raise_index_store_error(
    tmp_path: Path, hashing: Embedder, victim: str
) -> None:
    _seed(tmp_path, hashing, tenant="acme")
    path = _live_gen(tmp_path, "acme") / victim
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexStoreError, match=rf"acme.*{victim.replace('.', '[.]')}"):
        TenantIndex.open(tmp_path, "acme")
    with pytest.raises(IndexStoreError, match="acme"):
        IndexWriter(tmp_path, "acme", hashing)


def test_missing_files_and_bad_current(tmp_path: Path, hashing: Embedder) -> None:
    _seed(tmp_path, hashing, tenant="acme")
    gen = _live_gen(tmp_path, "acme")
    (gen / "index.bin").unlink()
    with pytest.raises(IndexStoreError, match=r"acme.*index[.]bin"):
        TenantIndex.open(tmp_path, "acme")
    (tmp_path / "acme" / "CURRENT").write_text("{not json")
    with pytest.raises(IndexStoreError, match="CURRENT"):
        TenantIndex.open(tmp_path, "acme")
    (tmp_path / "acme" / "CURRENT").write_text('{"generation": "../../etc", "version": 1}')
    with pytest.raises(IndexStoreError, match="invalid generation"):
        TenantIndex.open(tmp_path, "acme")


def test_unreadable_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "chunks.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(IndexStoreError, match=r"chunks[.]sqlite"):
        ChunkStore.open_readonly(path)


def test_embedder_mismatch_refused(tmp_path: Path, hashing: Embedder) -> None:
    _seed(tmp_path, hashing)
    other = HashingEmbedder(dim=64)
    with pytest.raises(IndexStoreError, match="hashing-384"):
        IndexWriter(tmp_path, "t", other)
    with pytest.raises(IndexStoreError, match="re-ingest"):
        TenantIndex.open(tmp_path, "t", embedder=other)
    index = TenantIndex.open(tmp_path, "t")
    with pytest.raises(IndexStoreError, match="dim"):
        index.search(other.encode(["apples"]), 3, 0.0)


def test_second_writer_waits_for_the_lock(tmp_path: Path, hashing: Embedder) -> None:
    with IndexWriter(tmp_path, "t", hashing) as first:
        with pytest.raises(IndexStoreError, match="another writer"):
            IndexWriter(tmp_path, "t", hashing, lock_timeout=0.2)
        first.upsert("a.txt", "text")
        first.commit()
    with IndexWriter(tmp_path, "t", hashing, lock_timeout=0.2) as second:
        assert second.base_version == 1


def test_crash_between_rename_and_current(
    tmp_path: Path, hashing: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new generation directory exists but CURRENT was never switched."""
    _seed(tmp_path, hashing)

    def crash(*_: object) -> None:
        raise OSError("simulated power cut")

    with IndexWriter(tmp_path, "t", hashing) as writer:
        writer.upsert("a.txt", "Changed text that never becomes live.")
        monkeypatch.setattr(os, "replace", crash)
        with pytest.raises(IndexStoreError, match="simulated power cut"):
            writer.commit()
    monkeypatch.undo()
    index = TenantIndex.open(tmp_path, "t")
    assert index.version == 1 and _text(index, "a.txt") == DOCS[0][1]
    assert not (tmp_path / "t" / "gen-000002").exists()
    # An orphan generation left by a SIGKILL at that point is replaced by the next writer.
    (tmp_path / "t" / "gen-000002").mkdir()
    (tmp_path / "t" / "gen-000002" / "junk").write_text("x")
    with IndexWriter(tmp_path, "t", hashing) as writer:
        writer.upsert("a.txt", "Second try.")
        assert writer.commit() == 2
    assert _text(TenantIndex.open(tmp_path, "t"), "a.txt") == "Second try."
    assert not (tmp_path / "t" / "gen-000002" / "junk").exists()


def test_use_after_commit_is_refused(tmp_path: Path, hashing: Embedder) -> None:
    writer = IndexWriter(tmp_path, "t", hashing)
    writer.upsert("a.txt", "text")
    assert writer.commit() == 1
    with pytest.raises(IndexStoreError, match="closed"):
        writer.upsert("b.txt", "more")
    writer.close()
