"""The HTTP tests' service: three documents indexed in-process (a public Jira issue, one only the ``hr`` group may
read, a Slack thread only ``U9`` may read) with the 4-d stand-in encoder, served by the real app
(:func:`rag_pipeline.http.app.create_app`) through FastAPI's TestClient. No dense model is loaded: searches run on
BM25."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rag_pipeline.http.app import create_app
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.index_info import claim_dense_model
from rag_pipeline.index.opening import StoreLocation
from rag_pipeline.retrieval.entry import SearchModels
from rag_pipeline.retrieval.retriever import RetrieverConfig
from rag_pipeline.serving.service import SearchService
from rag_pipeline.settings import ServeSettings
from rag_pipeline.sources.document import Acl, Document, content_hash
from rag_pipeline.stages import documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.sparse import Bm25Encoder
from rag_pipeline_tests.kit.slack_index import UNLOADABLE_MODEL, HashEncoder

PUBLIC = "jira:site.example:OPS-1"
HR_ONLY = "jira:site.example:HR-2"
U9_ONLY = "slack:T1:C9:1709251200.000100"
HR = "hr"
ALL_DOCUMENTS = (PUBLIC, HR_ONLY, U9_ONLY)


def _document(document_id: str, container: str, text: str, acl: Acl) -> Document:
    when = datetime(2024, 3, 1, tzinfo=UTC)
    return Document(id=document_id, source=document_id.split(":")[0], container=container, title=text[:30],
                    text=text, created=when, updated=when, version=when.timestamp(), content_hash=content_hash(text),
                    acl=acl)  # fmt: skip


DOCUMENTS = [
    _document(PUBLIC, "OPS", "postgres upgrade runbook: pause the replication before the upgrade", Acl(public=True)),
    _document(HR_ONLY, "HR", "postgres salary budget for the next year, kept by hr", Acl(groups=(HR,))),
    _document(U9_ONLY, "C9", "postgres private note about the upgrade window", Acl(users=("U9",))),
]


def reader(user: str, *groups: str) -> dict[str, str]:
    """The identity headers of a caller behind the trusted proxy (``X-User-Groups`` only when groups are given)."""
    headers = {"X-User-Id": user}
    if groups:
        headers["X-User-Groups"] = ",".join(groups)
    return headers


@pytest.fixture(scope="package")
def index_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three documents' index, written once; every service opens it in turn (one at a time)."""
    return build_index(tmp_path_factory.mktemp("http_index") / "qdrant", DOCUMENTS)


def build_index(folder: Path, documents: list[Document]) -> Path:
    """An index of ``documents`` at ``folder``, written as the chain writes one, by the 4-d stand-in encoder."""
    with EdgeVectorStore(folder) as store:
        store.create_collections(HashEncoder.dimension)
        claim_dense_model(store, UNLOADABLE_MODEL)
        index_documents_directly(store, documents_frame(documents), Chunker(), HashEncoder(), Bm25Encoder())
    return folder


def in_process_service(folder: Path, **options: Any) -> SearchService:
    models = SearchModels(UNLOADABLE_MODEL, Bm25Encoder())
    return SearchService(StoreLocation(path=folder), models, RetrieverConfig(), wait_seconds=5, **options)


@contextlib.contextmanager
def served(
    folder: Path, settings: ServeSettings | None = None, service_options: dict[str, Any] | None = None, **app: Any
) -> Iterator[TestClient]:
    """The real app over the index at ``folder``, started and stopped around the block (behind a trusted proxy
    unless ``settings`` say otherwise)."""
    service = in_process_service(folder, **(service_options or {}))
    application = create_app(service, settings or ServeSettings(trusted_proxy=True), **app)
    with TestClient(application, base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
def client(index_folder: Path) -> Iterator[TestClient]:
    with served(index_folder) as c:
        yield c
