"""``gpuplan ui``'s JSON API fuzzed from its own OpenAPI schema (schemathesis): whatever the query, never a 5xx;
a 4xx is one line in ``{"error": ...}``; a 200 is a gpuplan record. The searches (plan/train, plan/serve) and
validate run seconds per call and are left to tests/test_web.py."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed (pip install -e '.[ui-test]')")
pytest.importorskip("fastapi")

from hypothesis import HealthCheck, settings  # noqa: E402

from gpuplan.web.app import create_app  # noqa: E402

# The ASGI client names its host "testserver": an app made for a non-loopback bind takes that name (the loopback
# host check itself is tests/test_web.py's).
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(host="0.0.0.0"))


@schema.exclude(path_regex=r"^/api/(plan/|validate)").parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_query_is_a_server_error(case):
    response = case.call()
    assert response.status_code < 500, response.text
    body = response.json()
    if response.status_code >= 400:
        assert list(body) == ["error"] and isinstance(body["error"], str) and "\n" not in body["error"], body
    else:
        assert body["schema_version"] == 1 and isinstance(body["kind"], str)
