from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from groundproxy.errors import BadRequestError
from groundproxy.retrieval.html_text import html_to_text
from groundproxy.retrieval.readers import read_documents
from tests.retrieval.helpers import make_pdf


def test_folder_walk_ids_and_types(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("Plain text.", encoding="utf-8")
    (root / "sub" / "b.md").write_text("# Title\n\nMarkdown body.", encoding="utf-8")
    (root / "c.html").write_text("<p>Hello <b>world</b></p>", encoding="utf-8")
    make_pdf(root / "sub" / "d.pdf", ["PDF line one.", "PDF line two."])
    (root / "image.png").write_bytes(b"\x89PNG")
    (root / ".hidden.txt").write_text("secret", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        docs = {d.doc_id: d for d in read_documents([root])}
    assert set(docs) == {"a.txt", "sub/b.md", "c.html", "sub/d.pdf"}
    assert docs["c.html"].text == "Hello world"
    assert "PDF line one." in docs["sub/d.pdf"].text
    assert docs["a.txt"].source_path == str(root / "a.txt")
    assert "image.png" in caplog.text
    direct = list(read_documents([root / "sub" / "b.md"]))
    assert [d.doc_id for d in direct] == ["b.md"]


def test_html_drops_scripts_and_keeps_paragraphs() -> None:
    html = (
        "<html><head><title>Privacy</title><style>p {color: red}</style>"
        "<script>var secret = 'do not index';</script></head><body>"
        "<h1>Our policy</h1><p>We keep data\n   for seven years.</p>"
        "<div>Stored in Frankfurt &amp; Paris.<br>Encrypted.</div></body></html>"
    )
    text = html_to_text(html)
    assert text == (
        "Privacy\n\nOur policy\n\nWe keep data for seven years.\n\n"
        "Stored in Frankfurt & Paris. Encrypted."
    )


def test_jsonl_rows(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "rows.jsonl"
    rows = [
        {"id": "r1", "text": "First row."},
        {"doc_id": 7, "content": "Second row."},
        {"context": "Third row, no id."},
        {"id": "r4", "context": None},
        {"id": "odd#id", "text": "Fifth."},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        docs = list(read_documents([path]))
    assert [(d.doc_id, d.text) for d in docs] == [
        ("rows/r1", "First row."),
        ("rows/7", "Second row."),
        ("rows/3", "Third row, no id."),
        ("rows/odd_id", "Fifth."),
    ]
    assert "rows.jsonl:4" in caplog.text
    path.write_text('{"id": 1, "text": "ok"}\n{not json\n', encoding="utf-8")
    with pytest.raises(BadRequestError, match=r"rows.jsonl:2"):
        list(read_documents([path]))


def test_bad_inputs_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(BadRequestError, match=r"missing[.]txt"):
        list(read_documents([tmp_path / "missing.txt"]))
    (tmp_path / "x.docx").write_bytes(b"PK")
    with pytest.raises(BadRequestError, match="unsupported"):
        list(read_documents([tmp_path / "x.docx"]))
    bad_pdf = tmp_path / "folder" / "broken.pdf"
    bad_pdf.parent.mkdir()
    bad_pdf.write_bytes(b"%PDF-1.4 this is not really a pdf")
    with pytest.raises(BadRequestError, match=r"broken[.]pdf"):
        list(read_documents([tmp_path / "folder"]))
    bad_pdf.unlink()
    (tmp_path / "folder" / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    with pytest.raises(BadRequestError, match=r"dangling[.]txt"):
        list(read_documents([tmp_path / "folder"]))


def test_non_utf8_text_is_read(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes("Caf\xe9 cr\xe8me.".encode("latin-1"))
    docs = list(read_documents([tmp_path / "latin.txt"]))
    assert docs[0].text == "Café crème."
