"""A verifier's ranker of its own errors on disk: ``<model dir>/uncertainty.json``
(:class:`groundproxy.guards.uncertainty.ErrorRanker`, fitted on train data by
``training/uncertainty.py``). No file: no ranker (the claims' uncertainty stays the
entropy of their probabilities); an unreadable or invalid file is a ModelLoadError."""

from __future__ import annotations

import json
from pathlib import Path

from groundproxy.errors import ModelLoadError
from groundproxy.guards.uncertainty import ErrorRanker

RANKER_FILE = "uncertainty.json"


def read_ranker(model_dir: Path) -> ErrorRanker | None:
    path = Path(model_dir) / RANKER_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc
    try:
        return ErrorRanker.from_dict(json.loads(text))
    except (ValueError, AttributeError) as exc:
        raise ModelLoadError(f"{path}: {exc}") from exc
