"""``rag_pipeline.http.app``: the factory includes every router of ``ROUTERS``, the ingestion routes only with both
a launcher and ``RAG_INGEST_TOKEN``, mounts MCP at ``/mcp``, and on shutdown calls ``on_stop`` and lets the
index go."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from pydantic import SecretStr

from rag_pipeline.http.app import ROUTERS, create_app
from rag_pipeline.http.guard import MCP_PATH, flat_routes
from rag_pipeline.http.routes import ingest
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames
from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.settings import ServeSettings
from rag_pipeline_tests.unit.http.conftest import in_process_service


def _paths(app: object) -> set[str]:
    return {str(getattr(r, "path", "")) for r in flat_routes(app.router.routes)}  # type: ignore[attr-defined]


def test_every_router_is_included_and_mcp_mounted(tmp_path: Path) -> None:
    paths = _paths(create_app(in_process_service(tmp_path), ServeSettings()))
    for module in ROUTERS:
        assert {r.path for r in module.router.routes} <= paths, module.__name__  # type: ignore[attr-defined]
    assert MCP_PATH in paths


def test_the_ingestion_routes_need_a_launcher_and_their_token(tmp_path: Path) -> None:
    ingest_paths = {r.path for r in ingest.router.routes}  # type: ignore[attr-defined]
    launcher = IngestLauncher(tmp_path, ["slack"])
    token = ServeSettings(ingest_token=SecretStr("ingest-token-1"))
    assert ingest_paths <= _paths(create_app(in_process_service(tmp_path), token, ingest=launcher))
    assert not ingest_paths & _paths(create_app(in_process_service(tmp_path), ServeSettings(), ingest=launcher))
    assert not ingest_paths & _paths(create_app(in_process_service(tmp_path), token))


def test_shutdown_calls_on_stop_and_closes_the_service(index_folder: Path) -> None:
    service = in_process_service(index_folder)
    stopped: list[bool] = []
    with TestClient(create_app(service, ServeSettings(), on_stop=lambda: stopped.append(True)),
                    base_url="http://127.0.0.1") as client:  # fmt: skip
        assert client.get("/health").status_code == 200 and stopped == []
    assert stopped == [True]
    # The service let the index go: a writer opens it at once.
    EdgeVectorStore(index_folder, CollectionNames(), wait_seconds=0).close()
