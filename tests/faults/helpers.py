"""Helpers of the fault tests: task and connection accounting, a raw ASGI call."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def upstream_stats(port: int) -> dict[str, int]:
    return dict(httpx.get(f"http://127.0.0.1:{port}/_stats", timeout=5).json())


def wait_for(pred: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def _own_socket_inodes() -> set[str]:
    inodes: set[str] = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def open_connections(remote_port: int) -> int:
    """This process's ESTABLISHED TCP connections to 127.0.0.1:``remote_port``."""
    inodes = _own_socket_inodes()
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 10 or f[3] != "01":  # 01 = ESTABLISHED
                continue
            if int(f[2].rsplit(":", 1)[1], 16) == remote_port and f[9] in inodes:
                n += 1
    return n


async def settle_tasks(baseline: set[asyncio.Task[Any]], timeout_s: float = 3.0) -> set[str]:
    """Tasks still alive that were not alive at ``baseline`` (after letting them finish)."""
    me = asyncio.current_task()
    deadline = time.monotonic() + timeout_s
    while True:
        extra = {t for t in asyncio.all_tasks() if t is not me and t not in baseline}
        if not extra or time.monotonic() > deadline:
            return {repr(t.get_coro()) for t in extra}
        await asyncio.sleep(0.05)


async def asgi_post_then_disconnect(
    app: ASGIApp, path: str, body: dict[str, Any], headers: dict[str, str], after_s: float
) -> list[dict[str, Any]]:
    """POST ``body`` straight into the ASGI app; the client disconnects after ``after_s``."""
    raw = json.dumps(body).encode()
    gone = asyncio.Event()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        if gone.is_set():
            raise OSError("client went away")  # what a server does when writing to a closed socket
        messages.append(message)

    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")]
        + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("gp", 80),
    }
    asyncio.get_running_loop().call_later(after_s, gone.set)
    with contextlib.suppress(OSError):
        await app(scope, receive, send)
    return messages
