"""The tenant's calibration file, ``<data>/<tenant>/calibration.json`` (written by
``groundproxy calibrate``), and the cache the guard reads it through.

A policy with ``verifier.threshold: calibrated`` uses the file's ``threshold``. No file, an
unreadable one, or one made for another verifier is an error (the guard then follows the
policy's ``on_guard_error``: the answer comes back marked unverified, with the reason) —
never a silent fall-back to 0.6.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from groundproxy.errors import PolicyError
from groundproxy.policies.schema import Policy
from groundproxy.retrieval.fsutil import write_json_atomic
from groundproxy.retrieval.names import validate_tenant

CALIBRATION_FILE = "calibration.json"


def calibration_path(data_dir: Path, tenant: str) -> Path:
    return Path(data_dir) / validate_tenant(tenant) / CALIBRATION_FILE


def write_calibration(data_dir: Path, tenant: str, content: dict[str, Any]) -> Path:
    """Write atomically (temp file, fsync, rename)."""
    path = calibration_path(data_dir, tenant)
    write_json_atomic(path, content, prefix=".calibration-")
    return path


def read_calibration(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PolicyError(
            f"verifier.threshold is 'calibrated' but {path} does not exist: run "
            f"'groundproxy calibrate --tenant {path.parent.name} FILE.jsonl --alpha 0.1'"
        ) from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PolicyError(f"cannot read calibration file {path}: {exc}") from exc
    t = data.get("threshold") if isinstance(data, dict) else None
    if not isinstance(t, int | float) or isinstance(t, bool) or not 0.0 <= t <= 1.0:
        raise PolicyError(f"{path}: 'threshold' must be a number in [0, 1]")
    return dict(data)


class CalibrationCache:
    """Thread-safe reader of tenants' calibration files, re-read when a file changes."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self._cache: dict[Path, tuple[int, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def get(self, tenant: str) -> dict[str, Any]:
        path = calibration_path(self.data_dir, tenant)
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            stamp = -1
        with self._lock:
            hit = self._cache.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        data = read_calibration(path)
        with self._lock:
            self._cache[path] = (stamp, data)
        return data

    def threshold_for(self, policy: Policy, verifier_name: str) -> float | None:
        """The threshold override for ``policy``: None unless it says 'calibrated'."""
        if policy.verifier.threshold != "calibrated":
            return None
        data = self.get(policy.tenant)
        made_for = data.get("verifier")
        if made_for != verifier_name:
            raise PolicyError(
                f"the calibration file of tenant '{policy.tenant}' was made for verifier "
                f"'{made_for}', the policy uses '{verifier_name}': calibrate again"
            )
        return float(data["threshold"])
