"""The search-service tests' shared index."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def serving_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The search-service tests' small index, written once per session by the real ``rag-pipeline index``
    (``kit.serving_fixtures.build_index``). Nobody opens it: each module copies it for its services."""
    from rag_pipeline_tests.kit.serving_fixtures import build_index

    return build_index(tmp_path_factory.mktemp("serving_index"))
