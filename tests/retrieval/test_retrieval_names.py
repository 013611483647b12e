from __future__ import annotations

from pathlib import Path

import pytest

from groundproxy.errors import BadRequestError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.ingest import ingest_texts
from groundproxy.retrieval.names import sanitize_doc_id
from groundproxy.retrieval.tenant_index import (
    IndexWriter,
    TenantIndex,
    validate_doc_id,
    validate_tenant,
)

BAD_TENANTS = ["", "..", ".", "../etc", "a/b", "/abs", ".hidden", "a\x00b", "x" * 256, "a b"]
BAD_DOC_IDS = [
    "",
    "../etc/passwd",
    "/etc/passwd",
    "a/../b",
    "a/./b",
    "a//b",
    "a/",
    "..",
    "nul\x00l",
    "x" * 256,
    "tab\tname",
    "hash#frag",
    "semi;colon",
    "back\\slash",
    " padded",
]
GOOD_DOC_IDS = ["handbook.md", "sub/dir/file-1_2.txt", "wice-dev02986", "faq/42", "notes v2.md"]


@pytest.mark.parametrize("name", BAD_TENANTS)
def test_bad_tenants_rejected(name: str) -> None:
    with pytest.raises(BadRequestError):
        validate_tenant(name)


@pytest.mark.parametrize("doc_id", BAD_DOC_IDS)
def test_bad_doc_ids_rejected(doc_id: str) -> None:
    with pytest.raises(BadRequestError):
        validate_doc_id(doc_id)


@pytest.mark.parametrize("doc_id", GOOD_DOC_IDS)
def test_good_doc_ids_accepted(doc_id: str) -> None:
    assert validate_doc_id(doc_id) == doc_id


def test_sanitize_makes_any_path_valid() -> None:
    assert sanitize_doc_id("../../etc/pass#wd") == "etc/pass_wd"
    assert sanitize_doc_id("dir//a b/./c.md") == "dir/a b/c.md"
    with pytest.raises(BadRequestError):
        sanitize_doc_id("../..")


def test_traversal_never_touches_disk(tmp_path: Path, hashing: Embedder) -> None:
    data = tmp_path / "data"
    with pytest.raises(BadRequestError):
        TenantIndex.open(data, "../outside")
    with pytest.raises(BadRequestError):
        IndexWriter(data, "../outside", hashing)
    with pytest.raises(BadRequestError):
        ingest_texts(data, "acme", [("ok.txt", "fine"), ("../evil", "bad")], hashing)
    assert not (tmp_path / "outside").exists()
    assert not (data / "acme" / "CURRENT").exists()  # nothing was written
    with IndexWriter(data, "acme", hashing) as writer, pytest.raises(BadRequestError):
        writer.upsert("/abs/path", "text")
