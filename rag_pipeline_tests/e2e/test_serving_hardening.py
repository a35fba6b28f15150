"""What a black-box probe of ``rag-pipeline serve`` found (issue 47, part 6), each fixed and checked against a real
uvicorn process: nothing from a query string in the access log, the body limit enforced while reading (chunked
bodies too), strict JSON types with a named field, body-parse failures naming the body, a strictly parsed Host,
OpenAI-shaped errors on the OpenAI-compatible routes (read by the official client), and admission control: a
429 with Retry-After past RAG_SERVE_MAX_IN_FLIGHT while /health still answers."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from rag_pipeline_tests.kit import serving_fixtures as S

TOKEN = "hardening-test-token-5678"
AUTH = {"Authorization": f"Bearer {TOKEN}", "X-User-Id": "U1"}


@pytest.fixture(scope="module")
def service(serving_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S.ServiceProcess]:
    data = S.copy_index(serving_index, tmp_path_factory.mktemp("hardening") / "data")
    with S.running_service(
        data, data.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN, RAG_SERVE_MAX_IN_FLIGHT="1"
    ) as running:
        running.data_dir = data  # type: ignore[attr-defined]
        yield running


def _post(service: S.ServiceProcess, path: str, content: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        f"{service.url}{path}",
        content=content,
        headers={**AUTH, "Content-Type": "application/json", **(headers or {})},
        timeout=60,
    )


def test_a_token_or_query_in_the_query_string_never_reaches_the_access_log(service: S.ServiceProcess) -> None:
    secret, marker = "qs-secret-token-0042", "zebracornflakes-querystring"
    refused = httpx.get(f"{service.url}/v1/models?token={secret}", timeout=10)
    assert refused.status_code == 401
    answered = httpx.post(f"{service.url}/v1/search?q={marker}", json={"query": "postgres"}, headers=AUTH, timeout=60)
    assert answered.status_code == 200
    log = service.log()
    assert "GET /v1/models" in log and "POST /v1/search" in log  # the access log is on, paths kept
    assert (
        secret not in log
        and marker not in log
        and "?" not in "".join(line for line in log.splitlines() if "/v1/" in line)
    )


def test_the_body_limit_holds_while_reading_a_chunked_body(service: S.ServiceProcess) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: httpx sends it chunked
        yield b'{"query": "'
        for _ in range(200):
            yield b"x" * 1024
        yield b'"}'

    response = _post(service, "/v1/search", chunks())
    assert response.status_code == 413 and response.json()["field"] == "body", response.text
    # A chunked body under the limit is served.
    small = _post(service, "/v1/search", iter([b'{"query": ', b'"postgres"}']))
    assert small.status_code == 200, small.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"query": "postgres", "top_k": "10"}', "top_k"),
        (b'{"query": "postgres", "top_k": true}', "top_k"),
        (b'{"query": "postgres", "top_k": 10.0}', "top_k"),
        (b'{"query": "postgres", "answer": 1}', "answer"),
    ],
)
def test_json_types_are_strict_and_the_error_names_the_field(
    service: S.ServiceProcess, body: bytes, field: str
) -> None:
    response = _post(service, "/v1/search", body)
    assert response.status_code == 422 and response.json()["field"] == field, response.text


def test_a_body_that_cannot_be_parsed_is_a_400_on_the_body(service: S.ServiceProcess) -> None:
    response = _post(service, "/v1/search", b'{"query": "caf\xe9 \xff"}')
    assert response.status_code == 400 and response.json()["field"] == "body", response.text
    assert "Traceback" not in response.text


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/search", b'{"query": "postgres", "top_k": ' + b"9" * 5000 + b"}", "top_k"),
        ("/v1/search", b'{"query": "postgres", "top_k": -' + b"1" * 5000 + b"}", "top_k"),
        ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "n": ' + b"7" * 5000 + b"}", "n"),
    ],
    ids=["search", "negative", "chat"],
)  # fmt: skip
def test_an_integer_of_thousands_of_digits_is_refused_naming_its_field(
    service: S.ServiceProcess, path: str, body: bytes, field: str
) -> None:
    """Python will not convert a 5,000-digit integer, and the JSON parser raised before any field was known: the
    answer named ``body``. It names the field the number was given for, as for any value of the wrong kind."""
    response = _post(service, path, body)
    assert response.status_code == 422, response.text
    found = response.json()
    assert found["field"] == field and "5000 digits" in response.text, response.text
    assert "Traceback" not in response.text and "set_int_max_str_digits" not in response.text
    if path == "/v1/chat/completions":
        assert found["error"]["param"] == field  # OpenAI's shape there
    else:
        assert found["errors"] == [{"field": field, "message": found["error"].removeprefix(f"{field}: ")}]


def _raw_request(service: S.ServiceProcess, head: str, body: bytes = b"") -> tuple[int, dict[str, Any]]:
    """Sends ``head`` (request line and headers, CRLF-separated, without the blank line) and ``body`` as they are,
    on a socket of its own (an HTTP client would not send two Host headers); the status and the JSON answer."""
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
        sock.sendall(head.encode() + f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    header, _, payload = received.partition(b"\r\n\r\n")
    return int(header.split(b" ", 2)[1]), json.loads(payload)


@pytest.mark.parametrize("second", ["127.0.0.1", "evil.example"])
def test_a_request_with_two_host_headers_is_refused_naming_host(service: S.ServiceProcess, second: str) -> None:
    """Which Host did the client mean? A proxy in front and this service could each read a different one: the
    request is refused (400 naming Host), even when both copies are the same served name."""
    auth = f"Authorization: Bearer {TOKEN}\r\nX-User-Id: U1\r\nContent-Type: application/json"
    head = f"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\nHost: {second}\r\n{auth}"
    status, answer = _raw_request(service, head, b'{"query": "postgres"}')
    assert status == 400 and answer["field"] == "Host" and "more than once" in answer["error"], answer
    # The same request with one Host is answered.
    status, answer = _raw_request(service, f"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n{auth}",
                                  b'{"query": "postgres"}')  # fmt: skip
    assert status == 200 and "results" in answer, answer


@pytest.mark.parametrize(
    "host", ["127.0.0.1:80@evil.example", "127.0.0.1:80:81", "127.0.0.1/x", "127.0.0.1 evil.example", ""]
)
def test_a_host_header_that_is_not_host_and_port_is_refused(service: S.ServiceProcess, host: str) -> None:
    response = httpx.post(
        f"{service.url}/v1/search", json={"query": "postgres"}, headers={**AUTH, "Host": host}, timeout=10
    )
    assert response.status_code == 400 and response.json()["field"] == "Host"


def test_the_openai_routes_answer_errors_in_openais_shape(service: S.ServiceProcess) -> None:
    raw = _post(service, "/v1/chat/completions", b'{"messages": []}')
    assert raw.status_code == 422
    error = raw.json()["error"]
    assert error["param"] == "messages" and error["type"] == "invalid_request_error" and "messages" in error["message"]
    unauthorized = httpx.get(f"{service.url}/v1/models", timeout=10).json()["error"]
    assert unauthorized["code"] == "invalid_api_key" and unauthorized["param"] == "Authorization"
    # The official client reads the message from it.
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key="wrong-token", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        client.models.list()
    assert "Bearer token is required" in str(refused.value)
    # The service's own routes keep their shape.
    assert _post(service, "/v1/search", b'{"query": ""}').json()["field"] == "query"


def test_past_max_in_flight_a_request_gets_429_with_retry_after_and_health_still_answers(
    service: S.ServiceProcess,
) -> None:
    statuses: list[int] = []
    retry_after: list[str | None] = []
    start = threading.Barrier(24)

    def one() -> None:
        with httpx.Client(timeout=60) as client:
            start.wait()
            response = client.post(f"{service.url}/v1/search", json={"query": "postgres upgrade", "mode": "reranked"},
                                   headers=AUTH)  # fmt: skip
            statuses.append(response.status_code)
            if response.status_code == 429:
                retry_after.append(response.headers.get("retry-after"))
                assert response.json()["error"].startswith("the service is answering")

    threads = [threading.Thread(target=one) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(statuses) <= {200, 429} and 429 in statuses and 200 in statuses
    assert set(retry_after) == {"1"}
    assert httpx.get(f"{service.url}/health", timeout=10).status_code == 200
    text = httpx.get(f"{service.url}/metrics", headers=AUTH, timeout=10).text
    counted = {
        s.labels["status"]: s.value
        for f in text_string_to_metric_families(text)
        if f.name == "rag_requests"
        for s in f.samples
        if s.name == "rag_requests_total" and s.labels["route"] == "/v1/search"
    }
    assert counted.get("429", 0) == statuses.count(429)


def _token_command(service: S.ServiceProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        S.rag_pipeline_command("token", *args, "--data-dir", str(service.data_dir)),  # type: ignore[attr-defined]
        env=S.service_env(service.data_dir),  # type: ignore[attr-defined]
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_personal_token_reads_as_its_person_within_its_scopes_until_revoked(service: S.ServiceProcess) -> None:
    """Issue 47, part 2, end to end: `rag-pipeline token create` beside the running service, the token over HTTP,
    MCP and the OpenAI route, scopes enforced, identity headers refused, last use listed, revocation at once."""
    unknown = _token_command(service, "create", "--user", "nobody@serve.test")
    assert unknown.returncode != 0 and "--user 'nobody@serve.test'" in unknown.stderr
    created = _token_command(service, "create", "--user", "U1", "--scope", "search", "--note", "agent", "--json")
    assert created.returncode == 0, created.stderr
    made = json.loads(created.stdout)
    token, token_id = made["token"], made["id"]
    assert made["person"] == S.EMAILS["U1"] and made["scopes"] == ["search"]  # the id resolved to the person
    bearer = {"Authorization": f"Bearer {token}"}

    alice = httpx.post(f"{service.url}/v1/search", json={"query": "salary budget postgres"}, headers=bearer, timeout=60)
    assert alice.status_code == 200 and S.SECRET_THREAD in [r["document_id"] for r in alice.json()["results"]]
    widened = httpx.post(f"{service.url}/v1/search", json={"query": "postgres"}, headers={**bearer, "X-User-Id": "U3"},
                         timeout=60)  # fmt: skip
    assert widened.status_code == 400 and widened.json()["field"] == "X-User-Id"
    # Scopes: no answers with a search-only token.
    no_answer = httpx.post(f"{service.url}/v1/chat/completions", headers=bearer, timeout=60,
                           json={"messages": [{"role": "user", "content": "postgres?"}]})  # fmt: skip
    assert no_answer.status_code == 403 and no_answer.json()["error"]["param"] == "Authorization"
    answer_flag = httpx.post(f"{service.url}/v1/search", json={"query": "postgres", "answer": True}, headers=bearer,
                             timeout=60)  # fmt: skip
    assert answer_flag.status_code == 403 and answer_flag.json()["field"] == "answer"
    # Listing what one can search is a search: a token without the scope lists nothing.
    assert httpx.get(f"{service.url}/v1/tree", headers=bearer, timeout=30).status_code == 200
    answer_only = json.loads(_token_command(service, "create", "--user", "U1", "--scope", "answer", "--json").stdout)
    tree = httpx.get(f"{service.url}/v1/tree", headers={"Authorization": f"Bearer {answer_only['token']}"}, timeout=30)
    assert tree.status_code == 403, tree.text
    _token_command(service, "revoke", answer_only["id"])
    assert openai.OpenAI(base_url=f"{service.url}/v1", api_key=token, max_retries=0).models.list().object == "list"

    async def mcp_found() -> list[str]:
        async with (
            httpx2.AsyncClient(headers=bearer, timeout=60) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("search_documents", {"query": "salary budget postgres", "top_k": 10})
            return [r["document_id"] for r in (result.structured_content or {})["results"]]

    assert S.SECRET_THREAD in asyncio.run(mcp_found())
    listed = json.loads(_token_command(service, "list", "--json").stdout)
    states = {t["id"]: t["state"] for t in listed}
    assert states == {token_id: "active", answer_only["id"]: "revoked"}
    assert next(t for t in listed if t["id"] == token_id)["last_used_at"]
    assert token not in _token_command(service, "list").stdout

    assert _token_command(service, "revoke", token_id).returncode == 0
    revoked = httpx.post(f"{service.url}/v1/search", json={"query": "postgres"}, headers=bearer, timeout=60)
    assert revoked.status_code == 401 and "revoked" in revoked.json()["error"]
    assert token not in service.log()


def test_a_per_person_rate_limit_answers_429_to_that_person_only(serving_index: Path, tmp_path: Path) -> None:
    data = S.copy_index(serving_index, tmp_path / "data")
    with S.running_service(data, tmp_path / "serve.log", RAG_SERVE_TOKEN=TOKEN, RAG_SERVE_RATE_PER_MINUTE="3") as svc:
        statuses = [_post(svc, "/v1/search", b'{"query": "postgres"}').status_code for _ in range(4)]
        limited = _post(svc, "/v1/search", b'{"query": "postgres"}')
        other = _post(svc, "/v1/search", b'{"query": "postgres"}', {"X-User-Id": "U2"})
        health = httpx.get(f"{svc.url}/health", timeout=10).status_code
    assert statuses == [200, 200, 200, 429] and limited.status_code == 429
    assert 1 <= int(limited.headers["retry-after"]) <= 60 and "RAG_SERVE_RATE_PER_MINUTE" in limited.json()["error"]
    assert other.status_code == 200 and health == 200
