"""The one exception tree of groundproxy: domain errors, no HTTP in sight.

Every package raises from this tree; library errors are mapped at the boundary
(``raise X from exc``). This module imports nothing, so every layer (``policies``,
``guards``, ``retrieval``, ``models``, ``proxy``) may use it without an import cycle. The
HTTP layer owns the one table from class to (status, type, code):
:data:`groundproxy.proxy.errors.HTTP_ERRORS`. ::

    GroundproxyError                      (any other failure of ours)
    ├── BadRequestError                   (the request is malformed)
    │   ├── BodyTooLargeError             (the body passes the size limit)
    │   └── InvalidParamsError            (well-formed, but the values are refused)
    ├── AuthenticationError               (no key, or a key no tenant has)
    ├── PermissionDeniedError             (a known key that may not do this)
    ├── NotFoundError                     (no such thing for this tenant)
    │   └── UnknownModelError             (no such model)
    ├── ConflictError                     (an ambiguous reference; the upstream's 409)
    ├── RateLimitError                    (too many requests)
    │   └── OverloadedError               (the guard queue is full: on_overload: reject)
    ├── ServiceUnavailableError           (still loading)
    ├── UpstreamError                     (the upstream LLM failed)
    │   └── UpstreamTimeoutError          (... or did not answer in time)
    ├── PolicyError                       (bad policy file)
    ├── IndexStoreError                   (missing/corrupt index)
    ├── ModelLoadError                    (missing/corrupt model)
    └── GuardError                        (the guard itself failed)
        └── GuardTimeoutError             (latency budget exceeded)

``code`` is set only where a raise site names a more precise reason than its class (e.g.
``UpstreamError(..., code="upstream_unreachable")``); otherwise it is ``None`` and the HTTP
layer's table supplies the class's code.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "BodyTooLargeError",
    "ConflictError",
    "GroundproxyError",
    "GuardError",
    "GuardTimeoutError",
    "IndexStoreError",
    "InvalidParamsError",
    "ModelLoadError",
    "NotFoundError",
    "OverloadedError",
    "PermissionDeniedError",
    "PolicyError",
    "RateLimitError",
    "ServiceUnavailableError",
    "UnknownModelError",
    "UpstreamError",
    "UpstreamTimeoutError",
]


class GroundproxyError(Exception):
    """Base of every error groundproxy raises on purpose.

    ``retry_after`` (seconds, as the upstream's ``retry-after`` header said it) is set on
    rate-limit and unavailability errors the upstream reported; the HTTP layer sends it on.
    """

    retry_after: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


class BadRequestError(GroundproxyError):
    pass


class BodyTooLargeError(BadRequestError):
    pass


class InvalidParamsError(BadRequestError):
    pass


class AuthenticationError(GroundproxyError):
    pass


class PermissionDeniedError(GroundproxyError):
    pass


class NotFoundError(GroundproxyError):
    pass


class UnknownModelError(NotFoundError):
    pass


class ConflictError(GroundproxyError):
    """A conflict: the request's reference is ambiguous (e.g. a request id that names several
    answers), or the upstream reported one (409)."""


class RateLimitError(GroundproxyError):
    pass


class OverloadedError(RateLimitError):
    """The guard's queue would not answer within the latency budget; retry after
    ``retry_after_s`` seconds (sent as the ``retry-after`` header)."""

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ServiceUnavailableError(GroundproxyError):
    pass


class UpstreamError(GroundproxyError):
    pass


class UpstreamTimeoutError(UpstreamError):
    pass


class PolicyError(GroundproxyError):
    pass


class IndexStoreError(GroundproxyError):
    pass


class ModelLoadError(GroundproxyError):
    pass


class GuardError(GroundproxyError):
    pass


class GuardTimeoutError(GuardError):
    pass
