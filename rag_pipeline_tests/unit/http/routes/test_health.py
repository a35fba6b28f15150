"""``rag_pipeline.http.routes.health``: ``GET /health`` is 200 with the index's details on an open index, 503 with
the reason without one, and only the verdict for a caller without the service token."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from rag_pipeline.http.routes import health
from rag_pipeline.settings import ServeSettings
from rag_pipeline_tests.unit.http.conftest import ALL_DOCUMENTS, served


def test_health_is_routed_for_get_and_head() -> None:
    (route,) = health.router.routes
    assert route.path == "/health" and {"GET", "HEAD"} <= route.methods  # type: ignore[attr-defined]


def test_an_open_index_is_ready_with_its_details(index_folder: Path) -> None:
    with served(index_folder) as client:
        response = client.get("/health")
    body = response.json()
    assert response.status_code == 200 and body["status"] == "ok"
    assert body["documents"] == len(ALL_DOCUMENTS) and body["engine"] == "qdrant-edge"


def test_without_an_index_health_is_503_with_the_reason(tmp_path: Path) -> None:
    with served(tmp_path / "qdrant") as client:
        response = client.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable" and "no index" in response.json()["reason"]


def test_a_caller_without_the_token_gets_the_verdict_only(index_folder: Path) -> None:
    settings = ServeSettings(token=SecretStr("s3cret-token"), trusted_proxy=True)
    with served(index_folder, settings) as client:
        anonymous = client.get("/health")
        wrong = client.get("/health", headers={"Authorization": "Bearer not-it"})
        bearer = client.get("/health", headers={"Authorization": "Bearer s3cret-token"})
    assert anonymous.status_code == wrong.status_code == bearer.status_code == 200
    assert anonymous.json() == wrong.json() == {"status": "ok"}
    assert bearer.json()["documents"] == len(ALL_DOCUMENTS)
