"""Fixtures every kind of test uses: the vector store engines and a small crafted Slack export.

Helpers (data builders, emulators, harnesses) live in :mod:`rag_pipeline_tests.kit`; the search-service index
fixture is in ``e2e/conftest.py``.
"""

from __future__ import annotations

import os
import uuid
import warnings
from pathlib import Path

import pytest

from rag_pipeline_tests.kit.data import D1, basic_days, ts, write_slack_export

warnings.filterwarnings("ignore")


# A real Qdrant server (or cluster) joins the engines whenever QDRANT_TEST_URL names one (QDRANT_TEST_API_KEY for
# its key): every contract test then runs against it too, in collections of its own that are dropped afterwards.
# Without it, unit/index/test_qdrant_server_contract.py says so, once.
QDRANT_TEST_URL = os.environ.get("QDRANT_TEST_URL")
ENGINES = ["qdrant-edge", "qdrant-client-local", *(["qdrant-server"] if QDRANT_TEST_URL else [])]


@pytest.fixture(params=ENGINES)
def store(request, tmp_path: Path):
    """Every VectorStore engine, with 4-dimensional collections: the contract suites run on each."""
    from rag_pipeline.index.client_store import ClientVectorStore
    from rag_pipeline.index.edge_store import EdgeVectorStore
    from rag_pipeline.index.store import CollectionNames

    if request.param == "qdrant-server":
        names = CollectionNames.with_prefix(f"test_{uuid.uuid4().hex[:12]}")
        s = ClientVectorStore.connect(QDRANT_TEST_URL, os.environ.get("QDRANT_TEST_API_KEY"), names=names)
    elif request.param == "qdrant-edge":
        s = EdgeVectorStore(tmp_path / "qdrant")
    else:
        s = ClientVectorStore.connect()
    s.create_collections(4)
    yield s
    if request.param == "qdrant-server":
        for collection in (s.names.children, s.names.parents):
            s.client.delete_collection(collection)
    s.close()


@pytest.fixture
def slack_export(tmp_path: Path) -> Path:
    private = {"2024-03-01": [{"type": "message", "user": "U3", "text": "private plans", "ts": ts(D1 + 700)}]}
    return write_slack_export(tmp_path / "slack_export", basic_days(), private)
