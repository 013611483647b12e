"""The HTTP side of :mod:`groundproxy.errors`: one table from exception class to
(status, OpenAI error type, code), and the one handler that turns errors into OpenAI-shaped
bodies ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from typing import Any, NamedTuple

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from groundproxy.errors import (
    AuthenticationError,
    BadRequestError,
    BodyTooLargeError,
    ConflictError,
    GroundproxyError,
    GuardError,
    GuardTimeoutError,
    IndexStoreError,
    InvalidParamsError,
    ModelLoadError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    PolicyError,
    RateLimitError,
    ServiceUnavailableError,
    UnknownModelError,
    UpstreamError,
    UpstreamTimeoutError,
)
from groundproxy.proxy.upstream.redact import scrub_paths

log = structlog.get_logger(__name__)


class HttpError(NamedTuple):
    status: int
    type: str
    code: str | None


# The one table. A class not listed takes its nearest listed base's row.
HTTP_ERRORS: dict[type[GroundproxyError], HttpError] = {
    GroundproxyError: HttpError(500, "server_error", None),
    BadRequestError: HttpError(400, "invalid_request_error", None),
    BodyTooLargeError: HttpError(413, "invalid_request_error", "request_too_large"),
    InvalidParamsError: HttpError(422, "invalid_request_error", None),
    AuthenticationError: HttpError(401, "authentication_error", "invalid_api_key"),
    PermissionDeniedError: HttpError(403, "permission_error", "permission_denied"),
    NotFoundError: HttpError(404, "not_found_error", "not_found"),
    UnknownModelError: HttpError(404, "not_found_error", "model_not_found"),
    ConflictError: HttpError(409, "invalid_request_error", "conflict"),
    RateLimitError: HttpError(429, "rate_limit_error", "rate_limited"),
    OverloadedError: HttpError(429, "rate_limit_error", "guard_overloaded"),
    ServiceUnavailableError: HttpError(503, "server_error", "not_ready"),
    UpstreamError: HttpError(502, "upstream_error", "upstream_error"),
    UpstreamTimeoutError: HttpError(504, "upstream_error", "upstream_timeout"),
    PolicyError: HttpError(422, "invalid_request_error", "invalid_policy"),
    IndexStoreError: HttpError(500, "server_error", "index_error"),
    ModelLoadError: HttpError(500, "server_error", "model_error"),
    GuardError: HttpError(500, "server_error", "guard_error"),
    GuardTimeoutError: HttpError(500, "server_error", "guard_timeout"),
}

_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def http_error(exc: GroundproxyError) -> HttpError:
    """The table's row for ``exc`` (its nearest listed class), with a raise site's own code."""
    row = next(HTTP_ERRORS[c] for c in type(exc).__mro__ if c in HTTP_ERRORS)
    return row._replace(code=exc.code) if exc.code is not None else row


def error_code(exc: GroundproxyError) -> str | None:
    """The OpenAI ``code`` of ``exc`` (for logs that name it)."""
    return http_error(exc).code


def error_body(
    message: str, error_type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}`` as OpenAI sends it."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def exception_body(exc: GroundproxyError) -> dict[str, Any]:
    """The OpenAI error body of one of our exceptions (a response, or an SSE event)."""
    row = http_error(exc)
    return error_body(scrub_paths(exc.message), row.type, exc.param, row.code)


def error_response(exc: GroundproxyError) -> JSONResponse:
    """The error's response, with ``retry-after`` for an overload (ours) or when the
    upstream sent one."""
    headers = {"retry-after": exc.retry_after} if exc.retry_after else None
    if isinstance(exc, OverloadedError):
        headers = {"retry-after": str(exc.retry_after_s)}
    return JSONResponse(exception_body(exc), status_code=http_error(exc).status, headers=headers)


async def _groundproxy_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GroundproxyError)
    row = http_error(exc)
    if row.status >= 500:
        log.warning("request_failed", status=row.status, code=row.code, error=exc.message)
    return error_response(exc)


def _routing_message(request: Request, status: int, detail: str) -> tuple[str, str | None]:
    """Starlette's bare "Not Found" / "Method Not Allowed" → a sentence naming the request."""
    where = f"{request.method} {request.url.path}"
    if status == 404 and detail == "Not Found":
        return (
            f"Unknown request URL: {where}. groundproxy serves the OpenAI API under /v1 "
            "(chat/completions, responses, completions, embeddings, models).",
            "unknown_url",
        )
    if status == 405:
        return f"Method not allowed: {where}.", "method_not_allowed"
    return detail, None


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    etype = _STATUS_TYPES.get(exc.status_code, "server_error")
    message, code = _routing_message(request, exc.status_code, str(exc.detail))
    return JSONResponse(
        error_body(message, etype, None, code),
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
