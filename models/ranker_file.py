"""A verifier's model of its own errors on disk, beside its model files:

- ``uncertainty.json``: a ranker (:class:`groundproxy.guards.verdict.uncertainty.ErrorRanker`,
  fitted on train data by ``training/uncertainty.py``);
- else ``calibration.json``: Platt scaling of its raw P(supported)
  (:class:`groundproxy.guards.verdict.uncertainty.Calibration`, fitted on held-out train rows by
  ``training/calibration.py``) — the claims' uncertainty is then the calibrated
  P(the verdict is wrong).

Neither file: none (the claims' uncertainty is the decision margin); an unreadable or
invalid file is a ModelLoadError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from groundproxy.errors import ModelLoadError
from groundproxy.guards.verdict.uncertainty import Calibration, ErrorModel, ErrorRanker

RANKER_FILE = "uncertainty.json"
CALIBRATION_FILE = "calibration.json"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ModelLoadError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path}: not a JSON object")
    return data


def read_ranker(model_dir: Path) -> ErrorModel | None:
    """The verifier's ranker, else its calibration, else None (module docstring)."""
    path = Path(model_dir) / RANKER_FILE
    data = _read(path)
    if data is not None:
        try:
            return ErrorRanker.from_dict(data)
        except (ValueError, AttributeError) as exc:
            raise ModelLoadError(f"{path}: {exc}") from exc
    path = Path(model_dir) / CALIBRATION_FILE
    data = _read(path)
    if data is None:
        return None
    try:
        return Calibration.from_dict(data)
    except ModelLoadError as exc:
        raise ModelLoadError(f"{path}: {exc.message}") from exc
