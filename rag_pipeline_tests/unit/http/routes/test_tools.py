"""``rag_pipeline.http.routes.tools``: ``POST /v1/tools/search`` finds the tools a task needs among the indexed
ones, with the prompt tokens they save (narrowed by category and similarity, shaped by include_full_params and
max_description_length, the caller's active tools left out); ``POST /v1/tools/{name}/outcome`` counts an indexed
tool's calls and answers 404 naming ``name`` for any other; ``/v1/tools/active*`` reads and changes the caller's
active set per ``X-Session-Id``, refusing an unknown tool (404) and a full set (409) by ``names``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rag_pipeline.connectors.tools.catalog import parse_tool, tool_documents
from rag_pipeline.http.routes import tools
from rag_pipeline.serving.active_tools import ActiveSetLimits, ActiveToolSets
from rag_pipeline_tests.unit.http.conftest import build_index, reader, served

CATALOG = [
    {"name": "convert_currency", "description": "Convert an amount of money from one currency to another.",
     "tags": ["finance"]},
    {"name": "get_weather", "description": "Current weather and the forecast for a city.", "tags": ["Weather"],
     "inputSchema": {"type": "object", "properties": {"city": {"type": "string", "description": "the city"}}}},
    {"name": "create_issue", "description": "Open a new issue in the tracker with a summary.", "critical": True},
]  # fmt: skip
# Words of every tool: a search for them finds all three.
EVERY_TOOL = "convert money currency weather forecast city open issue tracker"


@pytest.fixture(scope="module")
def tools_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    documents, problems = tool_documents([parse_tool(t) for t in CATALOG], "catalog", datetime(2024, 3, 1, tzinfo=UTC))
    assert problems == []
    return build_index(tmp_path_factory.mktemp("tools_index") / "qdrant", documents)


def test_the_routes_are_tool_search_and_outcome() -> None:
    paths = {r.path for r in tools.router.routes}  # type: ignore[attr-defined]
    assert paths == {"/v1/tools/search", "/v1/tools/{name}/outcome", "/v1/tools/active", "/v1/tools/active/deactivate",
                     "/v1/tools/active/reset"}  # fmt: skip


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


def _names(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body["tools"]]


def test_a_category_filters_by_tag_not_by_words(tools_index: Path) -> None:
    with served(tools_index) as client:
        weather = client.post("/v1/tools/search", json={"query": EVERY_TOOL, "categories": ["weather"]},
                              headers=reader("U1"))  # fmt: skip
        none = client.post("/v1/tools/search", json={"query": EVERY_TOOL, "categories": ["travel"]},
                           headers=reader("U1"))  # fmt: skip
    assert weather.status_code == 200, weather.text
    # The tag is matched whatever its case; the critical tool is listed as always.
    assert _names(weather.json()) == ["get_weather", "create_issue"]
    assert _names(none.json()) == ["create_issue"]
    assert any("no indexed tool is tagged travel" in w for w in none.json()["warnings"])


def test_min_similarity_is_refused_outside_0_to_1_and_named(tools_index: Path) -> None:
    with served(tools_index) as client:
        refused = client.post("/v1/tools/search", json={"query": "money", "min_similarity": 1.5}, headers=reader("U1"))
        keyword = client.post("/v1/tools/search", json={"query": "money", "min_similarity": 0.5}, headers=reader("U1"))
    assert refused.status_code == 422 and "min_similarity" in str(refused.json()["field"])
    # The stand-in index has no dense model: tools are found by keywords, which score no similarity, and say so.
    assert keyword.status_code == 200
    assert any("min_similarity was not applied" in w for w in keyword.json()["warnings"])


def test_the_context_optimization_drops_schemas_and_cuts_descriptions(tools_index: Path) -> None:
    query = {"query": "weather forecast for a city", "top_k": 1}
    with served(tools_index) as client:
        full = client.post("/v1/tools/search", json=query, headers=reader("U1")).json()
        brief = client.post("/v1/tools/search", json={**query, "include_full_params": False,
                            "max_description_length": 20}, headers=reader("U1")).json()  # fmt: skip
        too_short = client.post("/v1/tools/search", json={**query, "max_description_length": 3}, headers=reader("U1"))
    assert full["tools"][0]["name"] == brief["tools"][0]["name"] == "get_weather"
    assert "input_schema" in full["tools"][0] and "input_schema" not in brief["tools"][0]
    assert brief["tools"][0]["description"] == "Current weather and…"
    assert brief["prompt_tokens"]["loaded"] < brief["prompt_tokens"]["loaded_full"] == full["prompt_tokens"]["loaded"]
    assert too_short.status_code == 422 and "max_description_length" in str(too_short.json()["field"])


def test_the_active_set_is_the_callers_per_session_and_left_out_of_searches(tools_index: Path) -> None:
    alice, other = {**reader("U1"), "X-Session-Id": "s1"}, {**reader("U1"), "X-Session-Id": "s2"}
    with served(tools_index) as client:
        start = client.get("/v1/tools/active", headers=alice).json()
        activated = client.post("/v1/tools/active", json={"names": ["get_weather"]}, headers=alice).json()
        mine = client.post("/v1/tools/search", json={"query": EVERY_TOOL}, headers=alice).json()
        theirs = client.post("/v1/tools/search", json={"query": EVERY_TOOL}, headers=other).json()
        kept = client.post("/v1/tools/search", json={"query": EVERY_TOOL, "exclude_active": False},
                           headers=alice).json()  # fmt: skip
        bob = client.get("/v1/tools/active", headers={**reader("U2"), "X-Session-Id": "s1"}).json()
        deactivated = client.post("/v1/tools/active/deactivate", json={"names": ["get_weather"]}, headers=alice).json()
        client.post("/v1/tools/active", json={"names": ["convert_currency"]}, headers=alice)
        reset = client.post("/v1/tools/active/reset", headers=alice).json()
    # A set starts as the critical set, which every search still lists; the other active tools are left out.
    assert start["active_tools"] == ["create_issue"] and start["critical"] == ["create_issue"]
    assert start["session"] == "s1"
    assert activated["active_tools"] == ["create_issue", "get_weather"]
    assert _names(mine) == ["convert_currency", "create_issue"] and mine["excluded_active"] == ["get_weather"]
    assert "get_weather" in _names(theirs) and theirs["active_tools"] == ["create_issue"]
    assert set(_names(kept)) == {"convert_currency", "get_weather", "create_issue"}
    assert bob["active_tools"] == ["create_issue"]  # another reader, the same session id: another set
    assert deactivated["active_tools"] == ["create_issue"]
    assert reset["active_tools"] == ["create_issue"]


def test_activating_an_unknown_tool_or_past_the_bound_is_refused_by_names(tools_index: Path) -> None:
    bounded = {"active_tools": ActiveToolSets(ActiveSetLimits(max_tools=2))}
    with served(tools_index, service_options=bounded) as client:
        unknown = client.post("/v1/tools/active", json={"names": ["get_weather", "nope"]}, headers=reader("U1"))
        fits = client.post("/v1/tools/active", json={"names": ["get_weather"]}, headers=reader("U1"))
        full = client.post("/v1/tools/active", json={"names": ["convert_currency"]}, headers=reader("U1"))
        empty = client.post("/v1/tools/active", json={"names": []}, headers=reader("U1"))
        after = client.get("/v1/tools/active", headers=reader("U1")).json()
    assert unknown.status_code == 404 and unknown.json()["field"] == "names" and "'nope'" in unknown.json()["error"]
    assert fits.status_code == 200
    assert full.status_code == 409 and full.json()["field"] == "names" and "at most 2" in full.json()["error"]
    assert empty.status_code == 422
    assert after["active_tools"] == ["create_issue", "get_weather"]  # nothing of a refused activation was added
