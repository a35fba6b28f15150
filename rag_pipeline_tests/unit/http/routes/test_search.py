"""``rag_pipeline.http.routes.search``: ``POST /v1/search`` answers each caller with the documents their identity
may read, and refuses a rewrite or an answer the service cannot give, naming the field."""

from __future__ import annotations

from fastapi.testclient import TestClient

from rag_pipeline.http.routes import search
from rag_pipeline_tests.unit.http.conftest import HR, HR_ONLY, PUBLIC, U9_ONLY, reader


def _ids(client: TestClient, headers: dict[str, str], **body: object) -> list[str]:
    response = client.post("/v1/search", json={"query": "postgres", "mode": "bm25", **body}, headers=headers)
    assert response.status_code == 200, response.text
    return [r["document_id"] for r in response.json()["results"]]


def test_the_route_is_post_v1_search() -> None:
    assert [(r.path, r.methods) for r in search.router.routes] == [("/v1/search", {"POST"})]  # type: ignore[attr-defined]


def test_each_caller_finds_only_what_they_may_read(client: TestClient) -> None:
    assert set(_ids(client, reader("U1"))) == {PUBLIC}
    assert set(_ids(client, reader("U1", HR))) == {PUBLIC, HR_ONLY}
    assert set(_ids(client, reader("U9"))) == {PUBLIC, U9_ONLY}
    assert set(_ids(client, reader("U9", HR))) == {PUBLIC, HR_ONLY, U9_ONLY}


def test_the_response_names_the_reader_and_the_mode(client: TestClient) -> None:
    response = client.post("/v1/search", json={"query": "salary budget", "mode": "bm25"}, headers=reader("U1", HR))
    body = response.json()
    assert body["mode"] == "bm25" and body["query"] == "salary budget"
    assert body["reader"]["user_id"] == "U1" and body["reader"]["groups"] == [HR]
    assert body["results"][0]["document_id"] == HR_ONLY  # the only document with those words


def test_no_identity_is_a_401_and_a_filter_narrows(client: TestClient) -> None:
    response = client.post("/v1/search", json={"query": "postgres", "mode": "bm25"})
    assert response.status_code == 401 and response.json()["field"] == "X-User-Id"
    assert set(_ids(client, reader("U9", HR), source="slack")) == {U9_ONLY}


def test_a_rewrite_or_an_answer_the_service_cannot_give_is_refused_naming_the_field(client: TestClient) -> None:
    rewrite = client.post("/v1/search", json={"query": "postgres", "rewrite": True}, headers=reader("U1"))
    assert rewrite.status_code == 503 and rewrite.json()["field"] == "rewrite"
    answer = client.post("/v1/search", json={"query": "postgres", "answer": True}, headers=reader("U1"))
    assert answer.status_code == 503 and answer.json()["field"] == "model"
