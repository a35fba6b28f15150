"""The MCP tool-search tools over this process's search service (``LocalTools``): ``search_tools`` with a category,
a similarity threshold and the context optimization, and the caller's active set (``activate_tools``,
``deactivate_tools``, ``get_active_tools``, ``reset_active_tools``) left out of its searches; refusals (a bad
``min_similarity``, an unknown tool, a full set) are tool errors naming the argument. The stdio server's remote
backend keeps its session's set on a running service."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from rag_pipeline.connectors.tools.catalog import parse_tool, tool_documents
from rag_pipeline.mcp.app import build_mcp_server
from rag_pipeline.mcp.backends import AnswersOff, LocalTools
from rag_pipeline.mcp.remote import RemoteTools
from rag_pipeline.mcp.server import ToolServer
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.serving.access import AccessQueries
from rag_pipeline.serving.active_tools import ActiveSetLimits, ActiveSetRefused, ActiveToolSets
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.schemas import ToolSearchRequest
from rag_pipeline.serving.service import SearchService
from rag_pipeline_tests.unit.http.conftest import build_index, in_process_service, served

READER = Reader(principal=Principal(user_id="U1"), email="u1@example.test", groups_from="directory")
CATALOG = [
    {"name": "convert_currency", "description": "Convert an amount of money from one currency to another.",
     "tags": ["finance"]},
    {"name": "get_weather", "description": "Current weather and the forecast for a city.", "tags": ["weather"],
     "inputSchema": {"type": "object", "properties": {"city": {"type": "string", "description": "the city"}}}},
    {"name": "create_issue", "description": "Open a new issue in the tracker with a summary.", "critical": True},
]  # fmt: skip
EVERY_TOOL = "convert money currency weather forecast city open issue tracker"


@pytest.fixture(scope="module")
def tools_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    documents, problems = tool_documents([parse_tool(t) for t in CATALOG], "catalog", datetime(2024, 3, 1, tzinfo=UTC))
    assert problems == []
    return build_index(tmp_path_factory.mktemp("mcp_tools_index") / "qdrant", documents)


@pytest.fixture
def service(tools_index: Path) -> Iterator[SearchService]:
    service = in_process_service(tools_index, active_tools=ActiveToolSets(ActiveSetLimits(max_tools=2)))
    service.start()
    try:
        yield service
    finally:
        service.close()


@pytest.fixture
def server(service: SearchService) -> ToolServer:
    # whoami/explain are not called here: no access queries are needed.
    return build_mcp_server(LocalTools(service, cast(AccessQueries, None)), lambda _ctx: READER)


def _call(server: ToolServer, name: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    async def call() -> Any:
        return await server.call_tool(name, arguments)

    result = anyio.run(call)
    structured: dict[str, Any] = result.structured_content
    return bool(result.is_error), structured.get("result", structured)


def _names(found: dict[str, Any]) -> list[str]:
    return [t["name"] for t in found["tools"]]


def test_search_tools_filters_by_category_and_shapes_the_definitions(server: ToolServer) -> None:
    failed, weather = _call(server, "search_tools", query=EVERY_TOOL, categories=["weather"],
                            include_full_params=False, max_description_length=20)  # fmt: skip
    assert not failed, weather
    assert _names(weather) == ["get_weather", "create_issue"]
    assert all("input_schema" not in t and len(t["description"]) <= 20 for t in weather["tools"])
    assert weather["prompt_tokens"]["loaded"] < weather["prompt_tokens"]["loaded_full"]


def test_a_bad_min_similarity_is_a_tool_error_naming_it(server: ToolServer) -> None:
    failed, refused = _call(server, "search_tools", query="money", min_similarity=-0.5)
    assert failed and refused["error_details"]["field"] == "min_similarity"
    failed, refused = _call(server, "search_tools", query="money", max_description_length=5)
    assert failed and refused["error_details"]["field"] == "max_description_length"


def test_the_active_set_is_left_out_of_searches_and_bounded(server: ToolServer) -> None:
    assert _call(server, "get_active_tools")[1]["active_tools"] == ["create_issue"]
    failed, activated = _call(server, "activate_tools", names=["get_weather"])
    assert not failed and activated["active_tools"] == ["create_issue", "get_weather"]
    found = _call(server, "search_tools", query=EVERY_TOOL)[1]
    assert "get_weather" not in _names(found) and found["excluded_active"] == ["get_weather"]
    failed, full = _call(server, "activate_tools", names=["convert_currency"])
    assert failed and "at most 2" in full["error"] and full["error_details"]["field"] == "names"
    failed, unknown = _call(server, "activate_tools", names=["no_such_tool"])
    assert failed and "no_such_tool" in unknown["error"] and unknown["error_details"]["field"] == "names"
    assert _call(server, "deactivate_tools", names=["get_weather"])[1]["active_tools"] == ["create_issue"]
    _call(server, "activate_tools", names=["convert_currency"])
    assert _call(server, "reset_active_tools")[1]["active_tools"] == ["create_issue"]
    assert "get_weather" in _names(_call(server, "search_tools", query=EVERY_TOOL)[1])


def test_the_stdio_servers_remote_backend_keeps_its_session_on_the_service(tools_index: Path) -> None:
    """The stdio server beside a running service sends the active-set calls over HTTP with its session: the
    service's answers (and refusals) come back as the local backend's would."""
    with served(tools_index) as client:
        remote = RemoteTools("http://127.0.0.1", "U1", None)
        client.headers.update({"X-User-Id": "U1"})
        remote._client = client  # the app in process instead of a socket
        activated = remote.active_tools("activate", ["get_weather"], READER, "stdio-1")
        found = remote.search_tools(ToolSearchRequest(query=EVERY_TOOL), READER, "stdio-1")
        other = remote.active_tools("get", [], READER, "stdio-2")
        with pytest.raises(ActiveSetRefused) as unknown:
            remote.active_tools("activate", ["nope"], READER, "stdio-1")
        with pytest.raises(AnswersOff):
            remote.ask("postgres upgrade", READER)
    assert activated["active_tools"] == ["create_issue", "get_weather"] and activated["session"] == "stdio-1"
    assert found["excluded_active"] == ["get_weather"] and "get_weather" not in _names(found)
    assert other["active_tools"] == ["create_issue"]
    assert unknown.value.status == 404 and unknown.value.field == "names"
