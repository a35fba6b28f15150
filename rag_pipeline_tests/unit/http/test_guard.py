"""``rag_pipeline.http.guard``: what every request passes before a route. The Host check (DNS rebinding), one copy
of each identity header, the service token (not for /health), the request id on every answer, the size limit
from Content-Length, per-caller admission, and the route template a request is counted under."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from pydantic import SecretStr

from rag_pipeline.http.guard import MCP_PATH, flat_routes, is_mcp
from rag_pipeline.http.limits import MAX_BODY_BYTES
from rag_pipeline.settings import ServeSettings
from rag_pipeline_tests.unit.http.conftest import HR, reader, served

SEARCH = {"query": "postgres", "mode": "bm25"}


def test_a_foreign_or_malformed_host_is_refused_naming_host(client: TestClient) -> None:
    assert client.post("/v1/search", json=SEARCH, headers=reader("U1")).status_code == 200
    for host in ("evil.example", "127.0.0.1:80@evil.example"):
        refused = client.post("/v1/search", json=SEARCH, headers={**reader("U1"), "Host": host})
        assert refused.status_code == 400 and refused.json()["field"] == "Host", host
    assert client.get("/health", headers={"Host": "localhost:8000"}).status_code == 200


def test_an_identity_header_given_twice_is_believed_in_neither_copy(client: TestClient) -> None:
    twice = client.post("/v1/search", json=SEARCH, headers=[("X-User-Id", "U1"), ("X-User-Id", "U9")])
    assert twice.status_code == 400 and twice.json()["field"] == "X-User-Id"
    groups = client.post("/v1/search", json=SEARCH,
                         headers=[("X-User-Id", "U1"), ("X-User-Groups", HR), ("X-User-Groups", "ops")])  # fmt: skip
    assert groups.status_code == 400 and groups.json()["field"] == "X-User-Groups"


def test_the_service_token_guards_everything_but_health(index_folder: Path) -> None:
    settings = ServeSettings(token=SecretStr("guard-token"), trusted_proxy=True)
    with served(index_folder, settings) as client:
        missing = client.post("/v1/search", json=SEARCH, headers=reader("U1"))
        metrics = client.get("/metrics")
        health = client.get("/health")
        bearer = client.post("/v1/search", json=SEARCH,
                             headers={**reader("U1"), "Authorization": "Bearer guard-token"})  # fmt: skip
    assert missing.status_code == 401 and missing.json()["field"] == "Authorization"
    assert missing.headers["www-authenticate"] == "Bearer"
    assert metrics.status_code == 401 and health.status_code == 200 and bearer.status_code == 200


def test_every_answer_carries_a_request_id_the_callers_when_plain(client: TestClient) -> None:
    kept = client.get("/health", headers={"X-Request-Id": "ticket-42.a:b"})
    assert kept.headers["x-request-id"] == "ticket-42.a:b"
    forged = client.get("/health", headers={"X-Request-Id": "x\r\nforged log line"}).headers["x-request-id"]
    assert forged != "x\r\nforged log line" and len(forged) == 32
    refused = client.post("/v1/search", json=SEARCH)  # an error answer has one too
    assert refused.status_code == 401 and len(refused.headers["x-request-id"]) == 32


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(client: TestClient) -> None:
    response = client.post(
        "/v1/search", content=b"{}", headers={**reader("U1"), "Content-Length": str(MAX_BODY_BYTES + 1)}
    )
    assert response.status_code == 413 and response.json()["field"] == "body"


def test_a_caller_over_the_rate_waits_and_others_do_not(index_folder: Path) -> None:
    with served(index_folder, ServeSettings(trusted_proxy=True, rate_per_minute=2)) as client:
        answers = [client.post("/v1/search", json=SEARCH, headers=reader("U1")).status_code for _ in range(3)]
        other = client.post("/v1/search", json=SEARCH, headers=reader("U2"))
        limited = client.post("/v1/search", json=SEARCH, headers=reader("U1"))
        health = client.get("/health")
    assert answers == [200, 200, 429] and other.status_code == 200
    assert int(limited.headers["retry-after"]) >= 1 and "RAG_SERVE_RATE_PER_MINUTE" in limited.json()["error"]
    assert health.status_code == 200  # /health is never held back


def test_routes_are_flattened_and_mcp_is_recognised(client: TestClient) -> None:
    paths = {getattr(r, "path", None) for r in flat_routes(client.app.router.routes)}  # type: ignore[attr-defined]
    assert {"/health", "/v1/search", "/v1/documents/{document_id:path}", "/metrics", MCP_PATH} <= paths
    assert is_mcp("/mcp") and is_mcp("/mcp/") and not is_mcp("/mcpx") and not is_mcp("/v1/search")
