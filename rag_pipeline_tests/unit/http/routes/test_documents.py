"""``rag_pipeline.http.routes.documents``: ``GET /v1/documents/{id}`` gives a document its caller may read and
answers a forbidden one exactly as a missing one; ``GET /v1/tree`` counts the caller's documents only."""

from __future__ import annotations

from fastapi.testclient import TestClient

from rag_pipeline.http.routes.documents import MAX_DOCUMENT_ID
from rag_pipeline_tests.unit.http.conftest import DOCUMENTS, HR, HR_ONLY, reader


def test_a_readable_document_comes_whole(client: TestClient) -> None:
    response = client.get(f"/v1/documents/{HR_ONLY}", headers=reader("U1", HR))
    assert response.status_code == 200
    body = response.json()
    expected = next(d for d in DOCUMENTS if d.id == HR_ONLY)
    assert body["document_id"] == HR_ONLY and body["text"] == expected.text and body["container"] == "HR"


def test_forbidden_reads_as_missing(client: TestClient) -> None:
    forbidden = client.get(f"/v1/documents/{HR_ONLY}", headers=reader("U1"))
    missing = client.get("/v1/documents/jira:site.example:NOPE-1", headers=reader("U1"))
    assert forbidden.status_code == missing.status_code == 404
    assert forbidden.json()["field"] == missing.json()["field"] == "document_id"
    assert forbidden.json()["error"].replace(HR_ONLY, "ID") == missing.json()["error"].replace(
        "jira:site.example:NOPE-1", "ID"
    )


def test_an_overlong_id_is_a_422_naming_it(client: TestClient) -> None:
    response = client.get("/v1/documents/" + "x" * (MAX_DOCUMENT_ID + 1), headers=reader("U1"))
    assert response.status_code == 422 and response.json()["field"] == "document_id"
    # At the limit the id is looked up (and not found).
    assert client.get("/v1/documents/" + "x" * MAX_DOCUMENT_ID, headers=reader("U1")).status_code == 404


def test_the_tree_counts_the_callers_documents(client: TestClient) -> None:
    def counts(headers: dict[str, str]) -> dict[str, int]:
        body = client.get("/v1/tree", headers=headers).json()
        return {c["path"]: c["documents"] for s in body["sources"] for c in s["containers"]}

    assert counts(reader("U1")) == {"jira/OPS": 1}
    assert counts(reader("U1", HR)) == {"jira/OPS": 1, "jira/HR": 1}
    assert counts(reader("U9")) == {"jira/OPS": 1, "slack/C9": 1}
    assert client.get("/v1/tree", headers=reader("U9")).json()["reader"]["user_id"] == "U9"
