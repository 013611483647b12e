"""The full data the benchmarks read (``../shared/data``, beside the clone), and the one line
a benchmark prints, exit code 2, when it is not there.

A clone of the repository alone holds only the tests' small seeded slices (``tests/data``);
full training and evaluation read ``../shared/data`` (its README: rows, sources, licences).
"""

from __future__ import annotations

import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def require(path: Path = SHARED) -> Path:
    """``path`` when it exists; else say which data is missing, in one line, and exit 2."""
    if not path.exists():
        name = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else "benchmark"
        print(
            f"bench.{name}: needs the full data at {path}, which is not there "
            "(put ../shared/data beside the clone; the tests need only tests/data)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return path
