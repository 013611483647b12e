"""The real on-disk index with the real embedder: ingest, search, replace, delete, reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundproxy.guards.types import Embedder, Evidence
from groundproxy.retrieval.ingest import delete_documents, ingest_paths
from groundproxy.retrieval.tenant_index import TenantIndex
from tests.retrieval.helpers import make_pdf

HANDBOOK = """# Employee handbook

The warranty on all company laptops lasts 12 months from the date of purchase.
Employees may work remotely two days per week.

## Travel

Train tickets are reimbursed in second class only. Hotel costs are capped at 150 euros per night.
"""
FAQ = (
    "Our support desk is open from 9 am to 5 pm on weekdays. "
    "Password resets are handled through the IT service portal."
)
PRIVACY = (
    "<html><head><title>Privacy</title><style>p {color: red}</style>"
    "<script>var secret = 'do not index this';</script></head><body>"
    "<p>We keep customer data for seven years.</p>"
    "<p>All customer data is stored in data centres located in Frankfurt.</p></body></html>"
)
QUERIES = {
    "How long is the laptop warranty?": "handbook.md",
    "Where is customer data stored?": "privacy.html",
    "When can I reach the support desk?": "faq.txt",
    "What pressure is the pump rated for?": "manuals/pump.pdf",
}


def _write_docs(root: Path) -> None:
    (root / "manuals").mkdir(parents=True, exist_ok=True)
    (root / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    (root / "faq.txt").write_text(FAQ, encoding="utf-8")
    (root / "privacy.html").write_text(PRIVACY, encoding="utf-8")
    make_pdf(
        root / "manuals" / "pump.pdf",
        [
            "The pump is rated for 40 bar of pressure.",
            "Service the pump every 500 operating hours.",
        ],
    )


def _search(index: TenantIndex, embedder: Embedder, query: str, k: int = 3) -> list[Evidence]:
    return index.search(embedder.encode([query]), top_k=k, min_score=0.0)[0]


def _assert_spans(index: TenantIndex, hits: list[Evidence]) -> None:
    for ev in hits:
        doc = index.get_document(ev.doc)
        assert doc is not None
        assert doc.text[ev.span[0] : ev.span[1]] == ev.text
        assert ev.index_version == index.version and ev.source == "index"
        assert len(ev.content_hash) == 16


def test_lifecycle(tmp_path: Path, minilm: Embedder) -> None:
    docs, data = tmp_path / "docs", tmp_path / "data"
    _write_docs(docs)

    empty = TenantIndex.open(data, "acme")
    assert (empty.version, empty.count, empty.generation) == (0, 0, None)
    assert empty.search(minilm.encode(["anything"]), 3, 0.0) == [[]]

    first = ingest_paths(data, "acme", [docs], minilm, progress=False)
    assert (first.added, first.replaced, first.unchanged, first.version) == (4, 0, 0, 1)
    index = TenantIndex.open(data, "acme", embedder=minilm)
    assert index.version == 1 and index.count == first.chunks_added
    assert [d.doc_id for d in index.documents()] == sorted(QUERIES.values())
    privacy = index.get_document("privacy.html")
    assert privacy is not None and privacy.chunks
    assert all("do not index" not in c.text for c in privacy.chunks)

    vectors = minilm.encode(list(QUERIES))
    results = index.search(vectors, top_k=3, min_score=0.0)
    for hits, expected in zip(results, QUERIES.values(), strict=True):
        assert hits[0].doc == expected
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        _assert_spans(index, hits)
    assert "12 months" in results[0][0].text
    assert index.search(vectors, top_k=3, min_score=0.99) == [[], [], [], []]
    chunk = index.get_chunk(results[0][0].doc, results[0][0].chunk)
    assert chunk is not None and chunk.text == results[0][0].text

    # Re-ingest with one changed document: its chunks are replaced.
    (docs / "handbook.md").write_text(HANDBOOK.replace("12 months", "24 months"), encoding="utf-8")
    second = ingest_paths(data, "acme", [docs], minilm, progress=False)
    assert (second.added, second.replaced, second.unchanged, second.version) == (0, 1, 3, 2)
    index = TenantIndex.open(data, "acme")
    assert index.version == 2
    hits = _search(index, minilm, "How long is the laptop warranty?", k=50)
    assert hits[0].doc == "handbook.md" and "24 months" in hits[0].text
    assert not any("12 months" in h.text for h in hits)
    _assert_spans(index, hits)

    # Delete one document.
    deleted = delete_documents(data, "acme", ["faq.txt", "not-there.md"])
    assert (deleted.deleted, deleted.missing, deleted.version) == (["faq.txt"], ["not-there.md"], 3)
    index = TenantIndex.open(data, "acme")
    assert index.version == 3 and index.get_document("faq.txt") is None
    hits = _search(index, minilm, "When can I reach the support desk?", k=50)
    assert hits and all(h.doc != "faq.txt" for h in hits)

    # A no-op ingest publishes nothing new.
    again = ingest_paths(data, "acme", [docs / "handbook.md"], minilm, progress=False)
    assert (again.unchanged, again.version) == (1, 3)

    # Reopening from disk gives the same answers.
    reopened = TenantIndex.open(data, "acme")
    before = index.search(vectors, 3, 0.0)
    after = reopened.search(vectors, 3, 0.0)
    assert [[(e.doc, e.chunk, e.span) for e in row] for row in before] == [
        [(e.doc, e.chunk, e.span) for e in row] for row in after
    ]
    for row_a, row_b in zip(before, after, strict=True):
        assert [e.score for e in row_a] == pytest.approx([e.score for e in row_b], abs=1e-5)
    gens = sorted(p.name for p in (data / "acme").iterdir() if p.name.startswith("gen-"))
    assert gens == ["gen-000002", "gen-000003"]  # live + previous kept, older collected
    index.close()
    reopened.close()
