"""Cancel a request's work (the upstream call, the guard) when its client goes away.

uvicorn does not cancel a handler when the client disconnects; it only delivers
``http.disconnect`` through ``receive()``. After the body is read, this watches
``receive()`` beside the work and cancels the work on a disconnect, so the upstream
request is closed instead of running to completion for nobody.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import structlog
from starlette.requests import Request

log = structlog.get_logger(__name__)
T = TypeVar("T")


class ClientDisconnected(Exception):
    """The client closed the connection before the response started."""


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def cancel_on_disconnect(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``; if the client disconnects first, cancel it and raise ClientDisconnected."""
    task: asyncio.Task[T] = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone = watcher.done() and not watcher.cancelled() and not task.done()
        watcher.cancel()
        if not task.done():
            task.cancel()
        # Wait for both to finish, so that nothing outlives the request.
        await asyncio.gather(watcher, task, return_exceptions=True)
    if gone:
        log.info("client_disconnected", cancelled="upstream_or_guard")
        raise ClientDisconnected()
    return task.result()
