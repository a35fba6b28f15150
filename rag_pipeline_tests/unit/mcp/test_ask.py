"""The MCP ``ask`` tool over this process's search service (``LocalTools``), answered by the project's
OpenAI-compatible fake through the real ``openai`` client: the answer cites what the caller may read (the same use
case as the chat route, serving/answers.py), a document the caller may not read never reaches the model or the
sources, a failing model leaves the documents found and says why, and without an answer model the tool says answers
are off. The stdio server beside a running service asks that service's chat."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import anyio
import openai
import pytest

from rag_pipeline.answers.generate import AnswerModel
from rag_pipeline.mcp.app import build_mcp_server
from rag_pipeline.mcp.backends import LocalTools
from rag_pipeline.mcp.remote import RemoteTools
from rag_pipeline.mcp.server import ToolServer
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.serving.access import AccessQueries
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.service import SearchService
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake
from rag_pipeline_tests.unit.http.conftest import DOCUMENTS, HR_ONLY, PUBLIC, build_index, in_process_service, served

READER = Reader(principal=Principal(user_id="U1"), email="u1@example.test", groups_from="directory")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchService]:
    running = in_process_service(build_index(tmp_path_factory.mktemp("mcp_ask") / "qdrant", DOCUMENTS))
    running.start()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def fake() -> Iterator[OpenAIFake]:
    with OpenAIFake() as server:
        server.respond(lambda body: "Pause the replication before the upgrade [1].")
        yield server


def _server(service: SearchService, model: AnswerModel | None) -> ToolServer:
    return build_mcp_server(LocalTools(service, cast(AccessQueries, None), model), lambda _ctx: READER)


def _call(server: ToolServer, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    async def call() -> Any:
        return await server.call_tool("ask", arguments)

    result = anyio.run(call)
    structured: dict[str, Any] = result.structured_content
    return bool(result.is_error), structured.get("result", structured)


def _model(fake: OpenAIFake, url: str | None = None) -> AnswerModel:
    client = openai.OpenAI(base_url=url or fake.base_url, api_key=API_KEY, max_retries=0, timeout=5)
    return AnswerModel("gpt-4o-mini", client=client)


def test_ask_answers_with_citations_from_what_the_reader_may_read(service: SearchService, fake: OpenAIFake) -> None:
    before = len(fake.calls("/chat/completions"))
    failed, answered = _call(_server(service, _model(fake)), question="how do I do the postgres upgrade?")
    assert not failed, answered
    assert answered["answer"] == "Pause the replication before the upgrade [1]." and answered["answer_error"] is None
    assert [s["document_id"] for s in answered["sources"]] == [PUBLIC]
    prompts = " ".join(str(m["content"]) for r in fake.calls("/chat/completions")[before:] for m in r.body["messages"])
    assert "salary" not in prompts and HR_ONLY not in prompts  # the HR document never reached the model


def test_a_failing_model_leaves_the_documents_and_the_reason(service: SearchService, fake: OpenAIFake) -> None:
    failed, answered = _call(_server(service, _model(fake, "http://127.0.0.1:9/v1")), question="postgres upgrade")
    assert not failed
    assert answered["answer"] is None and answered["answer_error"]
    assert PUBLIC in [s["document_id"] for s in answered["sources"]]


def test_ask_is_refused_without_an_answer_model_or_a_question(service: SearchService) -> None:
    failed, refused = _call(_server(service, None), question="postgres upgrade")
    assert failed and "answers are off" in refused["error"]
    failed, refused = _call(_server(service, None), question="  ")
    assert failed and refused["error_details"]["field"] == "question"


def test_the_stdio_servers_remote_backend_asks_the_running_services_chat(
    tmp_path_factory: pytest.TempPathFactory, fake: OpenAIFake
) -> None:
    folder = build_index(tmp_path_factory.mktemp("mcp_ask_remote") / "qdrant", DOCUMENTS)
    with served(folder, answers=_model(fake)) as client:
        remote = RemoteTools("http://127.0.0.1", "U1", None)
        client.headers.update({"X-User-Id": "U1"})
        remote._client = client  # the app in process instead of a socket
        answered = remote.ask("how do I do the postgres upgrade?", READER)
    assert answered["answer"] == "Pause the replication before the upgrade [1]." and answered["answer_error"] is None
    assert [s["document_id"] for s in answered["sources"]] == [PUBLIC]
