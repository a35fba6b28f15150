"""Fixtures every kind of test uses: the vector store engines and a small crafted Slack export.

Helpers (data builders, emulators, harnesses) live in :mod:`rag_pipeline_tests.kit`; the search-service index
fixture is in ``e2e/conftest.py``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from rag_pipeline_tests.kit.data import D1, basic_days, ts, write_slack_export

warnings.filterwarnings("ignore")


@pytest.fixture(params=["qdrant-edge", "qdrant-client-local"])
def store(request, tmp_path: Path):
    """Every VectorStore engine, with 4-dimensional collections: the contract suites run on each."""
    from rag_pipeline.index.client_store import ClientVectorStore
    from rag_pipeline.index.edge_store import EdgeVectorStore

    s = EdgeVectorStore(tmp_path / "qdrant") if request.param == "qdrant-edge" else ClientVectorStore.connect()
    s.create_collections(4)
    yield s
    s.close()


@pytest.fixture
def slack_export(tmp_path: Path) -> Path:
    private = {"2024-03-01": [{"type": "message", "user": "U3", "text": "private plans", "ts": ts(D1 + 700)}]}
    return write_slack_export(tmp_path / "slack_export", basic_days(), private)
