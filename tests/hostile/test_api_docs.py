"""``/docs`` and ``/openapi.json`` are off by default (issue 32, item 7): through the real
server (started without ``GROUNDPROXY_API_DOCS``) both are 404, as are ``/redoc`` and the
offline Swagger UI's files; with the setting on they are served offline
(``tests/e2e/test_inspector_browser.py::test_api_docs_are_served_offline``)."""

from __future__ import annotations

import pytest

from tests.hostile.conftest import Hostile, admin_key, auth

pytestmark = pytest.mark.slow


def test_docs_and_schema_are_off_by_default(hostile: Hostile) -> None:
    with hostile.client() as c:
        for path in ("/docs", "/openapi.json", "/redoc", "/docs/swagger-ui-bundle.js",
                     "/docs/oauth2-redirect"):  # fmt: skip
            for headers in ({}, auth(admin_key("ta"))):
                r = c.get(path, headers=headers)
                assert r.status_code == 404, (path, r.status_code, r.text[:200])
                assert r.headers["content-type"].startswith("application/json"), path
