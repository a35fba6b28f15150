"""The agent's own tree tool (issue 67): ``list_containers`` offered to the answer model takes ``root_path``,
``max_depth``, ``offset`` and ``limit`` and runs the reader's deep tree (the use case ``GET /v1/tree`` and MCP run),
driven by the project's OpenAI-compatible fake through the real ``openai`` client: depth 3 reaches document and page
nodes, a private channel's name and a restricted page's title never reach a non-member's model, a negative depth is
refused to the model as the tool's error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from rag_pipeline.answers.agent import agent_tools, run_agent
from rag_pipeline.answers.generate import AnswerModel
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.serving.answers import reader_tools
from rag_pipeline.serving.service import SearchService
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake
from rag_pipeline_tests.unit.http.conftest import build_index, in_process_service
from rag_pipeline_tests.unit.serving.test_tree_faces import DOCUMENTS, SECRET_PAGE_TITLE

MEMBER, STRANGER = Principal(user_ids=("U1",)), Principal(user_ids=("U9",))


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchService]:
    folder = build_index(tmp_path_factory.mktemp("agent_tree") / "qdrant", DOCUMENTS)
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
            done = [m for m in body["messages"] if m.get("role") == "tool"]
            question = next(str(m["content"]) for m in reversed(body["messages"]) if m.get("role") == "user")
            if done:
                return None
            if "DEEP" in question:
                return [("list_containers", {"max_depth": 3})]
            if "NEGATIVE" in question:
                return [("list_containers", {"max_depth": -1}), ("list_containers", {"limit": 5000})]
            return None

        server.respond_with_tools(calls)
        server.respond(lambda body: "Here is the tree.")
        yield server


def _model(fake: OpenAIFake) -> AnswerModel:
    return AnswerModel("gpt-4o-mini", client=openai.OpenAI(base_url=fake.base_url, api_key=API_KEY, max_retries=0))


def _tool_results(fake: OpenAIFake, before: int) -> list[dict[str, Any]]:
    """What the model was sent as tool results after request ``before``."""
    bodies = [r.body for r in fake.calls("/chat/completions")[before:]]
    return [json.loads(m["content"]) for body in bodies for m in body["messages"] if m.get("role") == "tool"]


def test_the_tool_schema_offers_the_deep_trees_arguments() -> None:
    [tree] = [t["function"] for t in agent_tools() if t["function"]["name"] == "list_containers"]
    assert {"prefix", "root_path", "max_depth", "offset", "limit"} <= set(tree["parameters"]["properties"])
    assert tree["parameters"]["properties"]["max_depth"]["minimum"] == 0


def test_depth_three_returns_document_and_page_nodes_to_a_member(service: SearchService, fake: OpenAIFake) -> None:
    before = len(fake.calls("/chat/completions"))
    answer = run_agent(_model(fake), reader_tools(service, MEMBER, "hybrid"), [("user", "DEEP what is there?")])
    [call] = answer.tool_calls
    assert call.name == "list_containers" and call.error is None and call.arguments == {"max_depth": 3}
    [result] = _tool_results(fake, before)
    kinds = {n["path"]: n["kind"] for n in result["nodes"]}
    assert {"document", "page"} <= set(kinds.values())  # below the containers, as GET /v1/tree lists them
    assert result["max_depth"] == 3 and "slack/#secret" in kinds  # the member's own private channel
    assert any(SECRET_PAGE_TITLE in n["name"] for n in result["nodes"])
    assert answer.answer.text == "Here is the tree."


def test_a_non_members_model_never_sees_a_private_name(service: SearchService, fake: OpenAIFake) -> None:
    before = len(fake.calls("/chat/completions"))
    answer = run_agent(_model(fake), reader_tools(service, STRANGER, "hybrid"), [("user", "DEEP what is there?")])
    [result] = _tool_results(fake, before)
    assert any(n["kind"] == "document" for n in result["nodes"])  # the public ones are listed, deep
    sent = json.dumps([r.body for r in fake.calls("/chat/completions")[before:]])
    assert "#secret" not in sent and "G0SECRET" not in sent and SECRET_PAGE_TITLE not in sent
    # The public page under the restricted one hangs from its nearest readable ancestor.
    assert any(n["name"] == "Deploy" for n in result["nodes"]) and answer.tool_calls[0].error is None


def test_a_negative_depth_and_an_oversized_page_are_refused_to_the_model(
    service: SearchService, fake: OpenAIFake
) -> None:
    answer = run_agent(_model(fake), reader_tools(service, MEMBER, "hybrid"), [("user", "NEGATIVE tree?")])
    negative, oversized = answer.tool_calls
    assert negative.error is not None and negative.error.startswith("max_depth:")
    assert oversized.error is not None and oversized.error.startswith("limit:")
