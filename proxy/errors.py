"""The one handler that turns :mod:`guards.errors` into OpenAI-shaped error bodies."""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from groundproxy.guards.errors import GroundproxyError
from groundproxy.proxy.redact import scrub_paths

log = structlog.get_logger(__name__)

_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def error_body(
    message: str, error_type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}`` as OpenAI sends it."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def exception_body(exc: GroundproxyError) -> dict[str, Any]:
    """The OpenAI error body of one of our exceptions (a response, or an SSE event)."""
    return error_body(scrub_paths(exc.message), exc.error_type, exc.param, exc.code)


def error_response(exc: GroundproxyError) -> JSONResponse:
    return JSONResponse(exception_body(exc), status_code=exc.status_code)


async def _groundproxy_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GroundproxyError)
    if exc.status_code >= 500:
        log.warning("request_failed", status=exc.status_code, code=exc.code, error=exc.message)
    return error_response(exc)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    etype = _STATUS_TYPES.get(exc.status_code, "server_error")
    return JSONResponse(
        error_body(str(exc.detail), etype, None, None),
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = ".".join(loc) or None
    msg = f"{param}: {first.get('msg', 'invalid request')}" if param else "invalid request"
    return JSONResponse(error_body(msg, "invalid_request_error", param, None), status_code=400)


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled_error", error_type=type(exc).__name__)
    return JSONResponse(
        error_body("internal error in groundproxy", "server_error", None, "internal_error"),
        status_code=500,
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(GroundproxyError, _groundproxy_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)
