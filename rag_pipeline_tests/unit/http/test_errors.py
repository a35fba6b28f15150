"""``rag_pipeline.http.errors``: the ``{"error", "field"}`` answers (OpenAI's shape on the OpenAI-compatible routes),
an answer model's failure as 502/504, the field of an integer too long to parse, and the handlers that turn
validation errors, refusals and Starlette's errors into those answers."""

from __future__ import annotations

import json
import sys

import httpx
import openai
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from rag_pipeline.http.errors import (
    OPENAI_ROUTES,
    RequestRefused,
    error,
    install_error_handlers,
    llm_failure,
    overlong_integer,
)


def test_an_error_names_its_field_and_a_401_on_the_token_asks_for_a_bearer() -> None:
    plain = error(404, "document 'x' not found", "document_id")
    assert plain.status_code == 404 and json.loads(plain.body) == {"error": "document 'x' not found",
                                                                   "field": "document_id"}  # fmt: skip
    assert "www-authenticate" not in plain.headers
    unauthenticated = error(401, "a token is required", "Authorization")
    assert unauthenticated.headers["www-authenticate"] == "Bearer"
    assert "www-authenticate" not in error(401, "who are you", "X-User-Id").headers


@pytest.mark.parametrize("path", OPENAI_ROUTES)
def test_the_openai_routes_answer_in_openais_shape(path: str) -> None:
    client_side = json.loads(error(429, "slow down", "X-User-Id", path).body)
    assert client_side == {
        "error": {"message": "slow down", "type": "invalid_request_error", "param": "X-User-Id",
                  "code": "rate_limit_exceeded"},
        "field": "X-User-Id",
    }  # fmt: skip
    assert json.loads(error(503, "off", "model", path).body)["error"]["type"] == "server_error"


def test_an_answer_models_failure_is_a_502_and_its_time_out_a_504() -> None:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    timed_out = llm_failure(openai.APITimeoutError(request))
    assert (timed_out.status, timed_out.field) == (504, "model") and "APITimeoutError" in str(timed_out)
    response = httpx.Response(503, request=request)
    failed = llm_failure(openai.APIStatusError("overloaded", response=response, body=None))
    assert (failed.status, failed.field) == (502, "model") and "HTTP 503" in str(failed)
    other = llm_failure(ValueError("a detail of the client's"))
    assert (other.status, str(other)) == (502, "the answer model failed (ValueError); try again later")


def test_overlong_integer_names_the_first_field_with_too_many_digits() -> None:
    limit = sys.get_int_max_str_digits()
    long = "9" * (limit + 1)
    assert overlong_integer(f'{{"query": "x", "filters": {{"top_k": [1, {long}]}}}}'.encode()) == (
        "filters.top_k.1",
        limit + 1,
    )
    assert overlong_integer(f'{{"top_k": -{long}}}'.encode()) == ("top_k", limit + 1)
    assert overlong_integer(b'{"top_k": ' + b"9" * limit + b"}") is None  # at the limit it parses
    assert overlong_integer(b"not json") is None


class _Body(BaseModel):
    top_k: int


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/v1/things")
    def things(body: _Body) -> dict[str, int]:
        if body.top_k == 0:
            raise RequestRefused(409, "top_k", "zero is refused here")
        return {"top_k": body.top_k}

    return app


def test_the_handlers_answer_validation_refusals_and_http_errors_with_the_field() -> None:
    with TestClient(_app()) as client:
        wrong_type = client.post("/v1/things", json={"top_k": "many"})
        assert wrong_type.status_code == 422 and wrong_type.json()["field"] == "top_k"
        assert wrong_type.json()["errors"][0]["field"] == "top_k"
        not_json = client.post("/v1/things", content=b"{not json", headers={"content-type": "application/json"})
        assert not_json.status_code == 400 and not_json.json()["field"] == "body"
        refused = client.post("/v1/things", json={"top_k": 0})
        assert refused.status_code == 409 and refused.json() == {"error": "zero is refused here", "field": "top_k"}
        wrong_method = client.get("/v1/things")
        assert wrong_method.status_code == 405 and "POST" in wrong_method.headers["allow"]
        assert client.get("/nowhere").json() == {"error": "Not Found", "field": None}
        digits = "9" * (sys.get_int_max_str_digits() + 1)
        overlong = client.post(
            "/v1/things", content=f'{{"top_k": {digits}}}', headers={"content-type": "application/json"}
        )
        assert overlong.status_code == 422 and overlong.json()["field"] == "top_k"
