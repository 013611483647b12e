"""Where the serve path's adapter signals of labelled rows are cached, and under which key.

Verifying thousands of rows by the serve path takes hours on two cores, so the signals
(:func:`groundproxy.proxy.offline.signals_of`) are cached on disk outside the repository,
under :data:`CACHE`, keyed by :func:`fingerprint` — a hash of the code that produces them and
of the model files. The training code (``training/answer_combiner.py``) and the k-shot
benchmark (``bench/kshot.py``) share the cache; :data:`POOL_SEED` orders their row pools.
A labelled file's cache is named by :func:`content_key` too — the sha256 of its bytes — so a
file of the same name with other rows (a held-out file named like an eval file) never reads
another file's signals.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "groundproxy-bench"
POOL_SEED = 1234
# The code that produces the cached signals (the serve path up to answer_signals); the
# adapter's aggregation and fitting (guards/adapter/combiner.py and features.py,
# proxy/cli/adapt.py) are left out on purpose: they run on the cached signals, so changing
# them must not invalidate the cache;
# so is the training code (training/, outside these folders), which the serve path never
# imports.
_SIGNAL_CODE = ("guards", "retrieval", "models", "policies")
_SIGNAL_FILES = (
    "proxy/serving/guarding.py",
    "proxy/serving/pipeline.py",
    "proxy/serving/guard_build.py",
    "proxy/cli/evaluate.py",
)
# guards/verdict/uncertainty.py ranks the claims' errors (ClaimResult.uncertainty); the signals
# record the entropy, not that rank, so it does not change them either
_NOT_SIGNALS = (
    "guards/__init__.py",
    "guards/adapter/combiner.py",
    "guards/adapter/features.py",
    "guards/judge/opinion.py",  # the judge step runs after the signals
    "guards/judge/merge.py",
    "guards/verdict/uncertainty.py",
)


@functools.cache
def _content_key(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def content_key(path: Path) -> str:
    """The first 16 hex digits of the sha256 of the file's bytes (read once per change)."""
    st = path.stat()
    return _content_key(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.cache
def fingerprint() -> str:
    """A short hash of the signal-producing code and the model files (names, sizes);
    ``$GROUNDPROXY_BENCH_FINGERPRINT`` pins an earlier one (only for a code change shown not
    to alter the signals, e.g. by a test that the new code computes the same numbers)."""
    pinned = os.environ.get("GROUNDPROXY_BENCH_FINGERPRINT")
    if pinned:
        return pinned
    h = hashlib.sha256()
    files = [p for d in _SIGNAL_CODE for p in sorted((ROOT / d).rglob("*.py"))]
    files += [ROOT / f for f in _SIGNAL_FILES]
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        if rel not in _NOT_SIGNALS and "__pycache__" not in rel:
            h.update(rel.encode() + b"\0" + p.read_bytes())
    models = ROOT / "models"
    for p in sorted(models.rglob("*.onnx")) + sorted(
        [*models.rglob("meta.json"), *models.rglob("build.json")]
    ):
        h.update(f"{p.relative_to(ROOT).as_posix()}:{p.stat().st_size}".encode())
    return h.hexdigest()[:12]
