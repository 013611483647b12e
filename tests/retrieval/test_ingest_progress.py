"""``groundproxy ingest`` of 200 small documents: the bar's total is counted before the first
document is read and never grows, and the bar moves while the documents are embedded
(issue 31, item 8). Before: the total grew by one per document read (0/1, 0/2 … 0/199) and
the bar sat at 0 % until the one embedding batch at the end."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a real CLI process and the real embedder


def test_200_small_documents_count_first_and_move(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(200):
        (docs / f"d{i:03d}.md").write_text(
            f"Robot model R{i} has a warranty of {i % 24 + 1} months and weighs {i} grams.",
            encoding="utf-8",
        )
    command = ["ingest", "--data", str(tmp_path / "d"), "--tenant", "t", str(docs)]
    done = subprocess.run(
        [sys.executable, "-m", "groundproxy.proxy", *command],
        capture_output=True,
        timeout=600,
    )
    err = done.stderr.decode()
    assert done.returncode == 0, err[-2000:]
    assert json.loads(done.stdout)["chunks_added"] == 200
    states = [(int(n), int(total)) for n, total in re.findall(r"(\d+)/(\d+) \[", err)]
    assert states and states[-1] == (200, 200), states[-3:]
    assert {total for _, total in states} == {200}, sorted({t for _, t in states})[:5]
    moving = sorted({n for n, _ in states if 0 < n < 200})
    assert len(moving) >= 3, moving  # it moved during the ingest, not only at its end
    assert "files=0/200" in err and "files=200/200" in err
