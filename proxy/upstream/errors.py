"""litellm / openai / httpx errors → our tree, each with one clean sentence and a stable code.

What the client reads says what happened, never how litellm wrapped it: no
``MidStreamFallbackError: APIConnectionError: …`` chains, and an HTTP status only when the
upstream really sent one (litellm reports a refused connection as a 500 it made up).

=====================================  ======  ==========================
what happened                          status  code
=====================================  ======  ==========================
connection refused / dropped           502     ``upstream_unreachable``
no answer within the policy's timeout  504     ``upstream_timeout``
upstream 429                           429     ``rate_limited`` (+ ``retry-after``)
upstream 503                           503     ``upstream_unavailable`` (+ ``retry-after``)
stream ended without a finish_reason   502     ``upstream_incomplete``
a 200 body that is not a valid answer  502     ``upstream_invalid`` (proxy.openai.upstream_bodies)
upstream 400 / 404 / 409 / 422         same    the upstream's code, when plain
upstream 401 / 403 (the policy's key)  same    ``upstream_authentication_failed`` /
                                               ``upstream_permission_denied``
upstream 413                           413     ``request_too_large``
any other upstream 4xx                 400     (its status named in the message)
any other upstream status or failure   502     ``upstream_error``
=====================================  ======  ==========================

An upstream 4xx keeps its status, so the openai SDKs raise the same class as against the
upstream itself (``NotFoundError`` for a wrong model name, ``AuthenticationError`` for a
wrong upstream key) instead of retrying an ``InternalServerError``; only the upstream's
5xx, timeouts and unreadable answers are 502/504. Messages are redacted
(:mod:`proxy.upstream.redact`).
"""

from __future__ import annotations

import re
from typing import Any

import structlog

from groundproxy.errors import (
    AuthenticationError,
    BadRequestError,
    BodyTooLargeError,
    ConflictError,
    GroundproxyError,
    InvalidParamsError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServiceUnavailableError,
    UpstreamError,
    UpstreamTimeoutError,
)
from groundproxy.proxy.upstream.redact import redact

log = structlog.get_logger(__name__)

# "litellm.InternalServerError: InternalServerError: OpenAIException - upstream exploded"
_WRAPPERS = re.compile(r"^(?:\s*(?:litellm\.)?[A-Za-z_]*(?:Error|Exception|Timeout)\s*(?::|-)\s*)+")
# the openai client's own prefix, which litellm keeps on some calls (embeddings)
_STATUS_PREFIX = re.compile(r"^Error code: \d{3} - ")
_TAILS = (
    " Error_str:", " Received Model Group", " LiteLLM Retried", " No fallback model",
    " Original exception:",
)  # fmt: skip
_CUT = "Stream ended before a finish_reason"
_UNREADABLE = "Invalid response object"  # litellm could not read a 200 body as its type


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not s for s in seen):
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _is_timeout(exc: BaseException) -> bool:
    import httpx
    import openai

    kinds = (openai.APITimeoutError, httpx.TimeoutException, TimeoutError)
    return any(isinstance(e, kinds) for e in _chain(exc))


def is_connection_drop(exc: BaseException) -> bool:
    """Did the connection fail before any answer (not a timeout, not an HTTP status)?

    litellm re-wraps openai's ``APIConnectionError`` (sometimes as a 500
    ``InternalServerError``), so the whole ``__cause__``/``__context__`` chain is read.
    """
    import httpx
    import openai

    if _is_timeout(exc):
        return False
    kinds = (
        openai.APIConnectionError,
        httpx.ConnectError,
        httpx.RemoteProtocolError,
        httpx.ReadError,
    )
    for e in _chain(exc):
        if isinstance(e, kinds):
            return True
        if "Connection error" in str(getattr(e, "message", "")):
            return True
    return False


def upstream_message(exc: BaseException) -> str:
    """The upstream's own words, without litellm's wrapper names, redacted, one line."""
    msg = str(getattr(exc, "message", "") or exc)
    msg = _STATUS_PREFIX.sub("", _WRAPPERS.sub("", " ".join(msg.split())))
    for tail in _TAILS:
        msg = msg.split(tail, 1)[0]
    return redact(msg.strip().rstrip("."))[:500]


def _real_status(exc: BaseException) -> int | None:
    """The HTTP status the upstream really sent (a response that came over the wire)."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    headers = getattr(response, "headers", None)
    if isinstance(status, int) and headers:  # litellm's made-up responses carry no headers
        return status
    return None


def _invalid_body(exc: BaseException) -> str:
    """``": 'field': problem"`` when litellm's own model refused the upstream's body."""
    from pydantic import ValidationError

    for e in _chain(exc):
        if isinstance(e, ValidationError) and e.errors():
            first = e.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "(body)"
            return f": '{field}': {str(first['msg']).rstrip('.')}"
    return ""


def retry_after(exc: BaseException) -> str | None:
    """The upstream's ``retry-after`` header, when it sent one."""
    for e in _chain(exc):
        headers = getattr(getattr(e, "response", None), "headers", None)
        value = headers.get("retry-after") if headers is not None else None
        if isinstance(value, str) and value.strip():
            return value.strip()[:32]
    return None


def connection_error(exc: BaseException) -> GroundproxyError | None:
    """A failure of the connection itself, whoever called (litellm or the wire client):
    refused / dropped → ``upstream_unreachable``, past the timeout → ``upstream_timeout``;
    None for anything else."""
    if is_connection_drop(exc):
        return UpstreamError(
            "The upstream model provider could not be reached (the connection failed).",
            code="upstream_unreachable",
        )
    if _is_timeout(exc):
        return timeout_error()
    return None


def timeout_error() -> UpstreamTimeoutError:
    return UpstreamTimeoutError("The upstream model provider did not answer in time.")


def failed_error(detail: str) -> UpstreamError:
    """Any other failure: ``upstream_error`` with the upstream's own words."""
    return UpstreamError(error_sentence("The upstream model provider failed", detail))


def error_sentence(lead: str, detail: str) -> str:
    """``"Lead: detail."`` (or ``"Lead."`` without a detail): one clean client sentence."""
    return f"{lead}: {detail}." if detail else f"{lead}."


# An upstream 4xx → the same status (the class the HTTP layer maps to it), the lead of the
# message, and the code when the upstream's own is not passed on (None: the class's code).
_CLIENT_ERRORS: dict[int, tuple[type[GroundproxyError], str, str | None]] = {
    400: (BadRequestError, "The upstream model provider refused the request", None),
    401: (
        AuthenticationError,
        "The upstream model provider refused the upstream key (the policy's "
        "upstream.api_key_env) with HTTP 401",
        "upstream_authentication_failed",
    ),
    403: (
        PermissionDeniedError,
        "The upstream model provider denied the upstream key access with HTTP 403",
        "upstream_permission_denied",
    ),
    404: (NotFoundError, "The upstream model provider answered HTTP 404", None),
    409: (ConflictError, "The upstream model provider answered HTTP 409 (conflict)", None),
    413: (BodyTooLargeError, "The upstream model provider found the request too large", None),
    422: (InvalidParamsError, "The upstream model provider could not process the request", None),
}
_OWN_CODES = frozenset({401, 403, 413})  # the upstream's code would name the client's key
_PLAIN_CODE = re.compile(r"[a-z][a-z0-9_]{1,63}")


def status_error(status: int, detail: str, code: str | None = None) -> GroundproxyError:
    """An upstream's HTTP error status (its message and ``code``) → our tree: 429
    ``rate_limited``, 503 ``upstream_unavailable``, a 4xx the same status (module docstring),
    any other ``upstream_error``."""
    if status == 429:
        return RateLimitError(
            error_sentence("The upstream model provider is rate limiting", detail)
        )
    if status == 503:
        return ServiceUnavailableError(
            error_sentence("The upstream model provider is unavailable", detail),
            code="upstream_unavailable",
        )
    if status in _CLIENT_ERRORS:
        kind, lead, own = _CLIENT_ERRORS[status]
        plain = code if code and _PLAIN_CODE.fullmatch(code) else None
        return kind(error_sentence(lead, detail), code=own if status in _OWN_CODES else plain)
    if 400 <= status < 500:
        return BadRequestError(
            error_sentence(
                f"The upstream model provider refused the request (HTTP {status})", detail
            )
        )
    return UpstreamError(
        error_sentence(f"The upstream model provider returned HTTP {status}", detail)
    )


def _client_status(exc: BaseException, litellm: Any) -> int | None:
    """The 4xx of a litellm error that reports the upstream's answer (its class says which:
    litellm's made-up responses carry no headers, so :func:`_real_status` misses them)."""
    kinds = (
        litellm.BadRequestError,
        litellm.AuthenticationError,
        litellm.PermissionDeniedError,
        litellm.NotFoundError,
        litellm.UnprocessableEntityError,
    )
    status = getattr(exc, "status_code", None)
    if isinstance(exc, kinds) and isinstance(status, int) and 400 <= status < 500:
        return status
    return None


def _upstream_code(exc: BaseException) -> str | None:
    """The ``code`` of the upstream's error body, where the exception chain kept it."""
    for e in _chain(exc):
        code = getattr(e, "code", None)
        if isinstance(code, str) and code:
            return code
    return None


def map_upstream_error(exc: Exception, litellm: Any) -> GroundproxyError:
    """litellm/openai errors → our tree (module docstring); ours pass through unchanged."""
    if isinstance(exc, GroundproxyError):
        return exc
    status = _real_status(exc)
    detail = upstream_message(exc)
    log.warning("upstream_error", error_type=type(exc).__name__, status=status)
    mapped = connection_error(exc) or _by_kind(exc, litellm, status, detail)
    mapped.retry_after = retry_after(exc)
    return mapped


def _by_kind(exc: Exception, litellm: Any, status: int | None, detail: str) -> GroundproxyError:
    if isinstance(exc, litellm.Timeout):
        return timeout_error()
    if _CUT in detail:  # litellm's own check of a stream (it calls it a 503)
        return UpstreamError(
            "The upstream's stream ended before the answer was complete (no finish_reason).",
            code="upstream_incomplete",
        )
    if _UNREADABLE in detail or _invalid_body(exc):  # never sent on: tracebacks, the body
        return UpstreamError(
            "The upstream model provider answered with a body that is not a valid "
            f"completion{_invalid_body(exc)}.",
            code="upstream_invalid",
        )
    if status == 429 or isinstance(exc, litellm.RateLimitError):
        return status_error(429, detail)
    if status == 503:  # only a real one: litellm labels failures of its own 503 too
        return status_error(503, detail)
    found = _client_status(exc, litellm) or status
    own_refusal = not isinstance(exc, litellm.AuthenticationError)
    if found is None and isinstance(exc, litellm.BadRequestError) and own_refusal:
        found = 400  # litellm's own refusal of the request
    if found is not None:
        return status_error(found, detail, _upstream_code(exc))
    return failed_error(detail)
