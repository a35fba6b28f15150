"""``rag_pipeline.http.routes.tools``: ``POST /v1/tools/search`` finds the tools a task needs among the indexed
ones, with the prompt tokens they save; ``POST /v1/tools/{name}/outcome`` counts an indexed tool's calls and
answers 404 naming ``name`` for any other."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rag_pipeline.connectors.tools.catalog import parse_tool, tool_documents
from rag_pipeline.http.routes import tools
from rag_pipeline_tests.unit.http.conftest import build_index, reader, served

CATALOG = [
    {"name": "convert_currency", "description": "Convert an amount of money from one currency to another."},
    {"name": "get_weather", "description": "Current weather and the forecast for a city.",
     "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"name": "create_issue", "description": "Open a new issue in the tracker with a summary."},
]  # fmt: skip


@pytest.fixture(scope="module")
def tools_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    documents, problems = tool_documents([parse_tool(t) for t in CATALOG], "catalog", datetime(2024, 3, 1, tzinfo=UTC))
    assert problems == []
    return build_index(tmp_path_factory.mktemp("tools_index") / "qdrant", documents)


def test_the_routes_are_tool_search_and_outcome() -> None:
    paths = {r.path for r in tools.router.routes}  # type: ignore[attr-defined]
    assert paths == {"/v1/tools/search", "/v1/tools/{name}/outcome"}


def test_tool_search_finds_the_tool_for_the_task_and_counts_the_tokens_saved(tools_index: Path) -> None:
    with served(tools_index) as client:
        response = client.post(
            "/v1/tools/search", json={"query": "convert money to another currency"}, headers=reader("U1")
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["catalog_tools"] == len(CATALOG)
    assert body["tools"][0]["name"] == "convert_currency"
    tokens = body["prompt_tokens"]
    assert tokens["all_tools"] > tokens["loaded"] > 0 and tokens["saved"] == tokens["all_tools"] - tokens["loaded"]


def test_an_outcome_is_counted_for_an_indexed_tool_only(tools_index: Path) -> None:
    with served(tools_index) as client:
        first = client.post("/v1/tools/get_weather/outcome", json={"success": True}, headers=reader("U1"))
        second = client.post("/v1/tools/get_weather/outcome", json={"success": False, "calls": 2}, headers=reader("U1"))
        unknown = client.post("/v1/tools/no_such_tool/outcome", json={"success": True}, headers=reader("U1"))
    assert first.status_code == second.status_code == 200
    assert (first.json()["calls"], first.json()["successes"]) == (1, 1)
    assert (second.json()["calls"], second.json()["successes"]) == (3, 1)  # one success in three calls
    assert unknown.status_code == 404 and unknown.json()["field"] == "name"
    assert "no_such_tool" in unknown.json()["error"]
