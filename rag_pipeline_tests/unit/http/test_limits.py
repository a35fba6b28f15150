"""``rag_pipeline.http.limits``: the Host names a service answers, the Host header's grammar, the access log
without query strings, and the body limit counted as the bytes arrive (chunked bodies too)."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from rag_pipeline.http.errors import install_error_handlers
from rag_pipeline.http.limits import (
    LOOPBACK_HOSTS,
    MAX_BODY_BYTES,
    AccessLogWithoutQuery,
    BodyLimit,
    BodyTooLarge,
    allowed_hosts,
    body_limit_in,
    host_of,
    uvicorn_log_config,
)


def test_allowed_hosts_on_loopback_beyond_it_and_configured() -> None:
    assert allowed_hosts("127.0.0.1", ()) == (*LOOPBACK_HOSTS, "127.0.0.1")
    assert allowed_hosts("127.0.0.2", ()) == (*LOOPBACK_HOSTS, "127.0.0.2")
    assert allowed_hosts("0.0.0.0", ()) is None  # any: a token guards it
    assert allowed_hosts("0.0.0.0", ("Search.Example.COM",)) == ("search.example.com",)


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("127.0.0.1:8000", "127.0.0.1"),
        ("LocalHost", "localhost"),
        ("[::1]:8000", "[::1]"),
        ("search.example.com", "search.example.com"),
        ("127.0.0.1:80@evil.example", None),
        ("evil.example/path", None),
        ("a b", None),
        ("host:1:2", None),
        ("", None),
    ],
)
def test_host_of_reads_host_and_port_only(header: str, host: str | None) -> None:
    assert host_of(header) == host


def test_the_access_log_drops_the_query_string() -> None:
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "GET", "/v1/tree?token=secret&prefix=x", "1.1", 200), None)  # fmt: skip
    assert AccessLogWithoutQuery().filter(record)
    assert record.getMessage() == '127.0.0.1:5 - "GET /v1/tree HTTP/1.1" 200'
    config = uvicorn_log_config()
    assert config["handlers"]["access"]["filters"] == ["path_only"]
    assert config["filters"]["path_only"]["()"] is AccessLogWithoutQuery


def test_body_limit_in_finds_the_refusal_in_groups_and_causes() -> None:
    assert body_limit_in(BodyTooLarge())
    assert body_limit_in(ExceptionGroup("task group", [ValueError(), BodyTooLarge()]))
    wrapped = RuntimeError("error parsing the body")
    wrapped.__cause__ = ExceptionGroup("task group", [BodyTooLarge()])
    assert body_limit_in(wrapped)
    assert not body_limit_in(ValueError()) and not body_limit_in(None)


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/v1/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    @app.post("/upload")
    async def upload(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    app.add_middleware(BodyLimit)
    return app


def test_a_v1_body_over_the_limit_is_a_413_even_when_chunked() -> None:
    with TestClient(_app()) as client:
        assert client.post("/v1/echo", content=b"x" * MAX_BODY_BYTES).json() == {"bytes": MAX_BODY_BYTES}
        over = client.post("/v1/echo", content=b"x" * (MAX_BODY_BYTES + 1))
        assert over.status_code == 413 and over.json()["field"] == "body"

        def chunks():  # no Content-Length: counted as it arrives
            for _ in range(5):
                yield b"y" * (MAX_BODY_BYTES // 4)

        chunked = client.post("/v1/echo", content=chunks())
        assert chunked.status_code == 413
        # Outside /v1 the limit does not apply.
        assert client.post("/upload", content=b"z" * (MAX_BODY_BYTES + 1)).json() == {"bytes": MAX_BODY_BYTES + 1}
