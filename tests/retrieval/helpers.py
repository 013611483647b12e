"""Helpers of the retrieval tests (not fixtures)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundproxy.testing.embedders import HashingEmbedder


class CountingEmbedder:
    """Wraps HashingEmbedder and counts the texts it was asked to embed."""

    def __init__(self) -> None:
        self._inner = HashingEmbedder()
        self.dim = self._inner.dim
        self.name = self._inner.name
        self.texts_encoded = 0

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts_encoded += len(texts)
        return self._inner.encode(texts)


def make_pdf(path: Path, lines: Sequence[str]) -> None:
    """Write a minimal one-page PDF with ``lines`` of Helvetica text (valid xref)."""
    ops = ["BT", "/F1 12 Tf", "72 720 Td"]
    for i, line in enumerate(lines):
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(f"({escaped}) Tj" if i == 0 else f"0 -16 Td ({escaped}) Tj")
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
