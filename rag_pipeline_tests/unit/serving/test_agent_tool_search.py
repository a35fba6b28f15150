"""The answer agent picks its tools by tool search (RAG_AGENT_TOOL_SEARCH, issue 67), driven by the project's
OpenAI-compatible fake through the real ``openai`` client over an index holding documents and a tool catalog that
names the agent's own tools: the model is first offered the critical set (``search_documents``), the tools tool
search found for the question and ``search_tools``; a tool not loaded is refused to the model with the way to load
it; ``search_tools`` loads it for the next round. Without a finder every tool is offered, as before."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openai
import pytest

from rag_pipeline.answers.agent import run_agent
from rag_pipeline.answers.generate import AnswerModel
from rag_pipeline.connectors.tools.catalog import parse_tool, tool_documents
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.tool_search import ToolSearch, ToolSearchConfig
from rag_pipeline.serving.answers import reader_tools
from rag_pipeline.serving.service import SearchService
from rag_pipeline.serving.tool_selection import agent_tool_finder
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake
from rag_pipeline_tests.unit.http.conftest import DOCUMENTS, build_index, in_process_service, reader, served

READER = Principal(user_id="U1")
# The agent's own tools as the service's MCP server lists them, and one it cannot run.
CATALOG = [
    {"name": "search_documents", "description": "Search the documents the caller may read.", "critical": True},
    {"name": "get_document", "description": "One whole document, its full text, by the id a search returned."},
    {"name": "list_containers", "description": "List the channels, projects and spaces the caller can browse."},
    {"name": "get_weather", "description": "Current weather and the forecast for a city."},
]


def _tool_documents() -> list[Any]:
    tools, problems = tool_documents([parse_tool(t) for t in CATALOG], "catalog", datetime(2024, 3, 1, tzinfo=UTC))
    assert problems == []
    return list(tools)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchService]:
    folder = build_index(tmp_path_factory.mktemp("agent_tool_search") / "qdrant", [*DOCUMENTS, *_tool_documents()])
    running = in_process_service(folder)
    running.start()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def fake() -> Iterator[OpenAIFake]:
    with OpenAIFake() as server:

        def calls(body: dict[str, Any]) -> list[tuple[str, Any]] | None:
            rounds = sum(1 for m in body["messages"] if m.get("role") == "assistant" and m.get("tool_calls"))
            question = next(str(m["content"]) for m in reversed(body["messages"]) if m.get("role") == "user")
            if "XQZ" not in question:
                return None
            # Round 1: the tree tool, not loaded yet; round 2: load it; round 3: call it; then answer.
            script = [[("list_containers", {})], [("search_tools", {"task": "list the channels and projects"})],
                      [("list_containers", {})]]  # fmt: skip
            return script[rounds] if rounds < len(script) else None

        server.respond_with_tools(calls)
        server.respond(lambda body: "Done.")
        yield server


def _model(fake: OpenAIFake) -> AnswerModel:
    return AnswerModel("gpt-4o-mini", client=openai.OpenAI(base_url=fake.base_url, api_key=API_KEY, max_retries=0))


def _offered(fake: OpenAIFake, before: int) -> list[list[str]]:
    """The tool names offered in each request after request ``before``."""
    bodies = [r.body for r in fake.calls("/chat/completions")[before:]]
    return [[t["function"]["name"] for t in body.get("tools") or []] for body in bodies]


def test_the_agent_starts_from_the_critical_set_and_what_tool_search_finds(
    service: SearchService, fake: OpenAIFake
) -> None:
    before = len(fake.calls("/chat/completions"))
    tools = reader_tools(service, READER, "hybrid", find_tools=agent_tool_finder(service, READER))
    answer = run_agent(_model(fake), tools, [("user", "read the whole document, its full text")])
    first = _offered(fake, before)[0]
    assert first == ["search_documents", "get_document", "search_tools"]  # list_containers was not found
    assert answer.active_tools == ["search_documents", "get_document"]
    assert "search_tools" in fake.calls("/chat/completions")[before].body["messages"][0]["content"]


def test_a_tool_not_loaded_is_refused_and_search_tools_loads_it(service: SearchService, fake: OpenAIFake) -> None:
    before = len(fake.calls("/chat/completions"))
    tools = reader_tools(service, READER, "hybrid", find_tools=agent_tool_finder(service, READER))
    answer = run_agent(_model(fake), tools, [("user", "XQZ postgres upgrade")], max_iterations=4)
    refused, loaded, listed = answer.tool_calls
    assert refused.name == "list_containers" and "not loaded: call search_tools" in str(refused.error)
    assert loaded.name == "search_tools" and loaded.error is None
    assert listed.name == "list_containers" and listed.error is None
    offered = _offered(fake, before)
    assert "list_containers" not in offered[0] and "list_containers" in offered[2]
    assert answer.active_tools is not None and "list_containers" in answer.active_tools
    assert "get_weather" not in answer.active_tools  # found maybe, but not the agent's to run


def test_without_a_finder_every_tool_is_offered_as_before(service: SearchService, fake: OpenAIFake) -> None:
    before = len(fake.calls("/chat/completions"))
    answer = run_agent(_model(fake), reader_tools(service, READER, "hybrid"), [("user", "postgres upgrade")])
    assert _offered(fake, before)[0] == ["search_documents", "get_document", "list_containers"]
    assert answer.active_tools is None


def test_the_chat_route_runs_the_agent_with_tool_search_where_the_setting_is_on(
    tmp_path: Path, fake: OpenAIFake
) -> None:
    """POST /v1/chat/completions with RAG_AGENT and RAG_AGENT_TOOL_SEARCH (the tool search config's flag): the model
    is offered the critical set, what tool search found and search_tools; the answer lists its active tools."""
    folder = build_index(tmp_path / "qdrant", [*DOCUMENTS, *_tool_documents()])
    model = AnswerModel("gpt-4o-mini", client=openai.OpenAI(base_url=fake.base_url, api_key=API_KEY, max_retries=0))
    options = {"tool_search": ToolSearch(ToolSearchConfig(agent_tool_search=True))}
    before = len(fake.calls("/chat/completions"))
    with served(folder, service_options=options, answers=model, agent_rounds=3) as client:
        body = {"messages": [{"role": "user", "content": "read the whole document, its full text"}]}
        response = client.post("/v1/chat/completions", json=body, headers=reader("U1"))
    assert response.status_code == 200, response.text
    assert response.json()["rag"]["active_tools"] == ["search_documents", "get_document"]
    assert _offered(fake, before)[0] == ["search_documents", "get_document", "search_tools"]
