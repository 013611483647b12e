"""The HTTP layer's one table from exception class to (status, type, code); the domain
errors themselves carry no HTTP."""

from __future__ import annotations

import json

import pytest

import groundproxy.errors as domain
from groundproxy.proxy.errors import HTTP_ERRORS, error_response, exception_body, http_error

# (status, OpenAI type, code) of each class, as the API has always answered
EXPECTED = {
    "GroundproxyError": (500, "server_error", None),
    "BadRequestError": (400, "invalid_request_error", None),
    "BodyTooLargeError": (413, "invalid_request_error", "request_too_large"),
    "InvalidParamsError": (422, "invalid_request_error", None),
    "AuthenticationError": (401, "authentication_error", "invalid_api_key"),
    "PermissionDeniedError": (403, "permission_error", "permission_denied"),
    "NotFoundError": (404, "not_found_error", "not_found"),
    "UnknownModelError": (404, "not_found_error", "model_not_found"),
    "ConflictError": (409, "invalid_request_error", "conflict"),
    "RateLimitError": (429, "rate_limit_error", "rate_limited"),
    "OverloadedError": (429, "rate_limit_error", "guard_overloaded"),
    "ServiceUnavailableError": (503, "server_error", "not_ready"),
    "UpstreamError": (502, "upstream_error", "upstream_error"),
    "UpstreamTimeoutError": (504, "upstream_error", "upstream_timeout"),
    "PolicyError": (422, "invalid_request_error", "invalid_policy"),
    "IndexStoreError": (500, "server_error", "index_error"),
    "ModelLoadError": (500, "server_error", "model_error"),
    "GuardError": (500, "server_error", "guard_error"),
    "GuardTimeoutError": (500, "server_error", "guard_timeout"),
}


@pytest.mark.parametrize("name", sorted(domain.__all__))
def test_every_domain_error_has_its_row(name: str) -> None:
    cls = getattr(domain, name)
    assert cls in HTTP_ERRORS
    assert tuple(http_error(cls("boom"))) == EXPECTED[name]
    assert not {"status_code", "error_type"} & set(vars(cls))  # no HTTP in the domain


def test_a_raise_site_code_wins_and_a_subclass_takes_its_base_row() -> None:
    exc = domain.UpstreamError("no route", code="upstream_unreachable")
    assert exception_body(exc)["error"]["code"] == "upstream_unreachable"

    class Flaky(domain.UpstreamTimeoutError):
        pass

    resp = error_response(Flaky("slow", param="model"))
    assert resp.status_code == 504
    assert json.loads(bytes(resp.body)) == {
        "error": {
            "message": "slow",
            "type": "upstream_error",
            "param": "model",
            "code": "upstream_timeout",
        }
    }


def test_overloaded_answers_429_with_retry_after() -> None:
    resp = error_response(domain.OverloadedError("guard queue full", retry_after_s=3))
    assert resp.status_code == 429 and resp.headers["retry-after"] == "3"
    assert json.loads(bytes(resp.body))["error"]["type"] == "rate_limit_error"
