"""Pure-ASGI middleware: request id in contextvars and echoed as ``x-request-id`` (and,
with ``serve --workers N``, the answering process as ``x-groundproxy-worker``).

It is also the last line of defence: an exception no handler turned into a response
becomes an OpenAI-shaped 500 carrying the request id, logged as one line (no traceback,
no message text), and the connection stays usable. Starlette's own server-error layer sits
outside every user middleware, so without this such a 500 had no ``x-request-id``, the
exception reached uvicorn (which drops the keep-alive connection) and a multi-line
traceback reached the log.
"""

from __future__ import annotations

import json
import os
import re
import uuid

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
log = structlog.get_logger(__name__)
_INTERNAL = json.dumps(
    {
        "error": {
            "message": "internal error in groundproxy",
            "type": "server_error",
            "param": None,
            "code": "internal_error",
        }
    }
).encode()


class RequestIdMiddleware:
    """``worker_header``: also send ``x-groundproxy-worker: <pid>`` (``serve --workers N``)."""

    def __init__(self, app: ASGIApp, worker_header: bool = False) -> None:
        self.app = app
        self.worker = str(os.getpid()).encode() if worker_header else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = ""
        for name, value in scope.get("headers", []):
            if name == b"x-request-id":
                incoming = value.decode("latin-1")
                break
        request_id = incoming if _SAFE_ID.match(incoming) else str(uuid.uuid4())
        scope.setdefault("state", {})["request_id"] = request_id
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id, path=scope.get("path"))

        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [(k, v) for k, v in message.get("headers", []) if k != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                if self.worker is not None:
                    headers.append((b"x-groundproxy-worker", self.worker))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:  # the last handler: answer, log one line, keep the connection
            frame = exc.__traceback__
            while frame is not None and frame.tb_next is not None:
                frame = frame.tb_next
            where = (
                f"{frame.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.tb_lineno}"
                if frame is not None
                else ""
            )
            log.error(
                "unhandled_error", error_type=type(exc).__name__, at=where, response_started=started
            )
            if not started:
                await send_with_id(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send_with_id({"type": "http.response.body", "body": _INTERNAL})
        finally:
            structlog.contextvars.clear_contextvars()
