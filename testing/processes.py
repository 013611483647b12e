"""Start and stop the real server processes the demo, tests and benchmarks use."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_process(
    args: list[str], env: dict[str, str] | None = None, log_path: Path | None = None
) -> subprocess.Popen[bytes]:
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, *args], env=full_env, stdout=out, stderr=subprocess.STDOUT
    )


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    """Poll ``url`` until it answers 200; fail fast if the process died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.args!r} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} not ready after {timeout_s:.0f} s")


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)


def start_fake_upstream(
    port: int, script: Path | None = None, log_path: Path | None = None
) -> subprocess.Popen[bytes]:
    args = ["-m", "groundproxy.testing.fake_upstream", "--port", str(port)]
    if script is not None:
        args += ["--script", str(script)]
    proc = start_process(args, log_path=log_path)
    wait_http(f"http://127.0.0.1:{port}/v1/models", proc, timeout_s=30)
    return proc


def start_proxy(
    port: int,
    policies: Path,
    data: Path,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    timeout_s: float = 600.0,  # start-up warms two verifiers (the ladder): slow when busy
) -> subprocess.Popen[bytes]:
    data.mkdir(parents=True, exist_ok=True)  # serve never creates it (ingest does)
    args = [
        "-m",
        "groundproxy.proxy",
        "serve",
        "--port",
        str(port),
        "--policies",
        str(policies),
        "--data",
        str(data),
    ]
    proc = start_process(args, env=env, log_path=log_path)
    wait_http(f"http://127.0.0.1:{port}/readyz", proc, timeout_s=timeout_s)
    return proc
