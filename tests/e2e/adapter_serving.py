"""For the adapter e2e tests: a real server over a fresh data folder, and ``groundproxy
calibrate --fit`` run as the real CLI process."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from groundproxy.testing.processes import free_port, start_proxy, stop_process


@contextlib.contextmanager
def serving(root: Path, specs: dict[str, dict[str, Any]]) -> Iterator[tuple[str, Path, Path]]:
    """A ``groundproxy serve`` process with a policy file per spec (by tenant) and an empty
    data folder under ``root``: (its URL, the policies folder, the data folder)."""
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    data.mkdir()
    for tenant, spec in specs.items():
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    port = free_port()
    # a generous start: the model loads take minutes on a busy 2-core machine
    proc = start_proxy(port, policies, data, log_path=root / "proxy.log", timeout_s=600)
    try:
        yield f"http://127.0.0.1:{port}", policies, data
    finally:
        stop_process(proc)


def run_fit(
    tenant: str, data: Path, policies: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``groundproxy calibrate --fit --json`` (and ``extra``) as the real CLI process."""
    return subprocess.run(
        [
            *(sys.executable, "-m", "groundproxy.proxy", "calibrate", "--fit"),
            *("--tenant", tenant, "--data", str(data), "--policies", str(policies), "--json"),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=600,
    )


def fit_adapter(tenant: str, data: Path, policies: Path, *extra: str) -> tuple[dict[str, Any], str]:
    """(the written adapter's content as ``--json`` prints it, the CLI's stderr); a failed
    fit fails the test with its stderr."""
    fit = run_fit(tenant, data, policies, *extra)
    assert fit.returncode == 0, fit.stderr
    content: dict[str, Any] = json.loads(fit.stdout.strip().splitlines()[-1])
    return content, fit.stderr
