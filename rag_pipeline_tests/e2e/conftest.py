"""The search-service tests' shared index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_pipeline_tests.kit.emulators.openai_api import OpenAIFake


@pytest.fixture(scope="session")
def serving_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The search-service tests' small index, written once per session by the real ``rag-pipeline index``
    (``kit.serving_fixtures.build_index``). Nobody opens it: each module copies it for its services."""
    from rag_pipeline_tests.kit.serving_fixtures import build_index

    return build_index(tmp_path_factory.mktemp("serving_index"))


@pytest.fixture(scope="module")
def fake() -> Iterator[OpenAIFake]:
    """The project's OpenAI-compatible fake on 127.0.0.1, one per test module (its scripted replies stay there)."""
    with OpenAIFake() as server:
        yield server
