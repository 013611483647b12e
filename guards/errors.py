"""The one exception tree of groundproxy.

Every package raises from this tree; library errors are mapped at the boundary
(``raise X from exc``) and a single handler in ``proxy.errors`` turns them into
OpenAI-shaped error bodies::

    GroundproxyError                      500 server_error
    ├── BadRequestError                   400 invalid_request_error
    │   ├── BodyTooLargeError             413 invalid_request_error
    │   └── InvalidParamsError            422 invalid_request_error
    ├── AuthenticationError               401 authentication_error
    ├── PermissionDeniedError             403 permission_error
    ├── NotFoundError                     404 not_found_error
    │   └── UnknownModelError             404 model_not_found
    ├── RateLimitError                    429 rate_limit_error
    ├── ServiceUnavailableError           503 not_ready        (still loading)
    ├── UpstreamError                     502 upstream_error
    │   └── UpstreamTimeoutError          504 upstream_timeout
    ├── PolicyError                       422 invalid_policy   (bad policy file)
    ├── IndexStoreError                   500 index_error      (missing/corrupt index)
    ├── ModelLoadError                    500 model_error      (missing/corrupt model)
    └── GuardError                        500 guard_error      (the guard itself failed)
        └── GuardTimeoutError             (latency budget exceeded)
"""

from __future__ import annotations


class GroundproxyError(Exception):
    """Base of every error groundproxy raises on purpose."""

    status_code = 500
    error_type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code


class BadRequestError(GroundproxyError):
    status_code = 400
    error_type = "invalid_request_error"


class BodyTooLargeError(BadRequestError):
    status_code = 413
    code = "request_too_large"


class InvalidParamsError(BadRequestError):
    status_code = 422


class AuthenticationError(GroundproxyError):
    status_code = 401
    error_type = "authentication_error"
    code = "invalid_api_key"


class PermissionDeniedError(GroundproxyError):
    status_code = 403
    error_type = "permission_error"
    code = "permission_denied"


class NotFoundError(GroundproxyError):
    status_code = 404
    error_type = "not_found_error"
    code = "not_found"


class UnknownModelError(NotFoundError):
    code = "model_not_found"


class RateLimitError(GroundproxyError):
    status_code = 429
    error_type = "rate_limit_error"
    code = "rate_limited"


class ServiceUnavailableError(GroundproxyError):
    status_code = 503
    code = "not_ready"


class UpstreamError(GroundproxyError):
    status_code = 502
    error_type = "upstream_error"
    code = "upstream_error"


class UpstreamTimeoutError(UpstreamError):
    status_code = 504
    code = "upstream_timeout"


class PolicyError(GroundproxyError):
    status_code = 422
    error_type = "invalid_request_error"
    code = "invalid_policy"


class IndexStoreError(GroundproxyError):
    code = "index_error"


class ModelLoadError(GroundproxyError):
    code = "model_error"


class GuardError(GroundproxyError):
    code = "guard_error"


class GuardTimeoutError(GuardError):
    code = "guard_timeout"
