"""``rag_pipeline.http.routes.access``: ``GET /v1/whois`` describes the caller from the principal directory, and
another person only for an admin; ``GET /v1/explain/{id}`` says which grant lets the caller read a document, and
answers a document the caller may not read exactly as a missing one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rag_pipeline.directory.accounts import Account, DirectorySnapshot
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.http.routes import access
from rag_pipeline.settings import ServeSettings
from rag_pipeline_tests.unit.http.conftest import HR, HR_ONLY, PUBLIC, reader, served

GRANT = "member of Jira group hr"
ADMIN = "carol@example.com"  # RAG_SERVE_ADMINS: an identity as callers send it
AS_ADMIN = {"X-User-Email": ADMIN}


@pytest.fixture(scope="module")
def directory_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("directory") / "directory.sqlite"
    snapshot = DirectorySnapshot("jira", "site.example", time.time())
    snapshot.add(Account("jira", "site.example", "U1", "Alice A", "alice@example.com", groups={HR: GRANT}))
    snapshot.add(Account("jira", "site.example", "U2", "Bob B", "bob@example.com"))
    DirectoryStore(path).replace(snapshot)
    return path


@pytest.fixture
def client(index_folder: Path, directory_file: Path) -> TestClient:
    settings = ServeSettings(trusted_proxy=True, admins=(ADMIN,))
    with served(index_folder, settings, directory_file=directory_file) as c:
        yield c  # type: ignore[misc]


def test_the_routes_are_whois_and_explain() -> None:
    assert {r.path for r in access.router.routes} == {"/v1/whois", "/v1/explain/{document_id:path}"}  # type: ignore[attr-defined]


def test_whois_describes_the_caller_with_the_grant_behind_each_group(client: TestClient) -> None:
    alice = client.get("/v1/whois", headers=reader("U1"))
    assert alice.status_code == 200
    assert alice.json()["person"] == "Alice A" and alice.json()["grants"] == [{"group": HR, "because": GRANT}]
    bob = client.get("/v1/whois", headers=reader("U2"))
    assert bob.json()["person"] == "Bob B" and bob.json()["groups"] == []
    stranger = client.get("/v1/whois", headers=reader("U404"))
    assert stranger.status_code == 404 and stranger.json()["field"] == "X-User-Id"


def test_another_person_is_for_admins_only(client: TestClient) -> None:
    refused = client.get("/v1/whois", params={"person": "alice@example.com"}, headers=reader("U2"))
    assert refused.status_code == 403 and refused.json()["field"] == "person"
    admin = client.get("/v1/whois", params={"person": "alice@example.com"}, headers=AS_ADMIN)
    assert admin.status_code == 200 and admin.json()["person"] == "Alice A"


def test_explain_names_the_grant_and_hides_what_the_caller_may_not_read(client: TestClient) -> None:
    visible = client.get(f"/v1/explain/{HR_ONLY}", headers=reader("U1", HR))
    assert visible.status_code == 200 and visible.json()["visible"] is True
    assert any(GRANT in reason for reason in visible.json()["because"])
    assert client.get(f"/v1/explain/{PUBLIC}", headers=reader("U2")).json()["visible"] is True
    hidden = client.get(f"/v1/explain/{HR_ONLY}", headers=reader("U2"))
    missing = client.get("/v1/explain/jira:site.example:NOPE-9", headers=reader("U2"))
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["field"] == missing.json()["field"] == "document_id"
    # An admin asking about Bob is told the document is hidden from him, and why.
    about_bob = client.get(f"/v1/explain/{HR_ONLY}", params={"person": "U2"}, headers=AS_ADMIN)
    assert about_bob.status_code == 200 and about_bob.json()["visible"] is False
