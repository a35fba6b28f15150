"""The MCP package through the SDK's own tool manager: every tool registered with its one-line description, the
arguments validated into the application layer's request models (a bad one is a tool error naming its field),
the reader always the server's, and the stdio server's fallback from a stopped service to the index here."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from rag_pipeline.answers.wording import say
from rag_pipeline.mcp.app import build_mcp_server, tool_description
from rag_pipeline.mcp.backends import SNIPPET_CHARS, tool_result, tool_search_result
from rag_pipeline.mcp.remote import FallbackTools, RefusedBesideService, ServiceGone
from rag_pipeline.mcp.server import ToolServer
from rag_pipeline.mcp.tools import MAX_TOOL_TOP_K, TOOLS
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.serving.access import AccessRefused
from rag_pipeline.serving.identity import IdentityError, Reader
from rag_pipeline.serving.schemas import SearchRequest
from rag_pipeline.serving.shared_index import IndexUnavailable

READER = Reader(principal=Principal(user_id="U1"), email="u1@example.test", groups_from="directory")
RESULT = {"document_id": "d1", "title": "t", "url": None, "source": "slack", "container": "C1", "updated": None,
          "authors": ["a"], "score": 0.123456789, "child_text": "x" * (SNIPPET_CHARS + 10)}  # fmt: skip


class RecordingBackend:
    """A backend that answers from fixed data and records who asked what."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Reader]] = []

    def search(self, request: SearchRequest, reader: Reader) -> dict[str, Any]:
        self.calls.append(("search", request, reader))
        # "nothing" finds nothing (in any language): the reader may read no document about it.
        found = [] if "nothing" in request.query or "프린터" in request.query else [RESULT]
        return tool_search_result({"mode": request.mode, "results": found})

    def document(self, document_id: str, reader: Reader) -> dict[str, Any] | None:
        self.calls.append(("document", document_id, reader))
        return {"document_id": document_id} if document_id == "d1" else None

    def whois(self, reader: Reader, person: str | None) -> dict[str, Any]:
        if person is not None:
            raise AccessRefused(403, "person", "asking about another person needs the admin scope")
        return {"person": reader.email}

    def tree(self, reader: Reader, prefix: str | None) -> list[dict[str, Any]]:
        raise IndexUnavailable("lent to a writer")

    def tree_view(self, reader: Reader, prefix: str | None, view: Any) -> dict[str, Any]:
        raise IndexUnavailable("lent to a writer")

    def explain(self, document_id: str, reader: Reader, person: str | None) -> dict[str, Any]:
        return {"visible": True}

    def search_tools(self, request: Any, reader: Reader) -> dict[str, Any]:
        return {"tools": [], "mode": request.mode}

    def tool_outcome(self, name: str, request: Any, reader: Reader) -> dict[str, Any] | None:
        return None

    def feedback(self, request: Any, reader: Reader) -> dict[str, Any] | None:
        return {"recorded": True, "grade": request.grade}


def _call(server: ToolServer, name: str, **arguments: Any) -> dict[str, Any]:
    async def call() -> Any:
        return await server.call_tool(name, arguments)

    result = anyio.run(call)
    assert not result.is_error, result
    structured: dict[str, Any] = result.structured_content
    return structured.get("result", structured)


def _failed(server: ToolServer, tool: str, **arguments: Any) -> dict[str, Any]:
    """A failed call's structured content (``error``, ``error_details``), after checking the MCP error flag and
    that the text content is the SDK's message with the same words."""

    async def call() -> Any:
        return await server.call_tool(tool, arguments)

    result = anyio.run(call)
    assert result.is_error, result
    structured: dict[str, Any] = result.structured_content
    message = result.content[0].text
    prefix = f"Error executing tool {tool}"  # the SDK's; the rest is the tool's own words
    own = message.removeprefix(prefix).removeprefix(": ") or "the tool failed"  # a crash: the SDK's words only
    assert message.startswith(prefix) and own == structured["error"], message
    return structured


def _refused(server: ToolServer, tool: str, **arguments: Any) -> str:
    return str(_failed(server, tool, **arguments)["error"])


@pytest.fixture
def backend() -> RecordingBackend:
    return RecordingBackend()


@pytest.fixture
def server(backend: RecordingBackend) -> ToolServer:
    return build_mcp_server(backend, lambda _ctx: READER)


def test_every_tool_is_registered_with_its_docstring_on_one_line(server: ToolServer) -> None:
    async def listed() -> Any:
        return await server.list_tools()

    tools = {t.name: t for t in anyio.run(listed)}
    assert list(tools) == [t.__name__ for t in TOOLS]
    for tool in TOOLS:
        description = tools[tool.__name__].description or ""
        assert description == tool_description(tool) and "\n" not in description and len(description) > 40
        assert "ctx" not in tools[tool.__name__].input_schema["properties"]  # the reader is never an argument


def test_a_search_is_validated_clamped_and_run_as_the_servers_reader(server: ToolServer, backend) -> None:
    found = _call(server, "search_documents", query="kernel panic", top_k=500, source="slack")
    assert found["count"] == 1 and found["query"] == "kernel panic" and found["mode"] == "routed"
    assert found["results"][0]["score"] == 0.123457 and len(found["results"][0]["passage"]) == SNIPPET_CHARS
    name, request, reader = backend.calls[-1]
    assert name == "search" and request.top_k == MAX_TOOL_TOP_K and request.source == ["slack"] and reader is READER
    assert _refused(server, "search_documents", query="kernel", since="yesterday-ish").startswith("since")
    assert _refused(server, "search_documents", query=" ").startswith("query")
    assert _refused(server, "search_documents", query="kernel", top_k=0).startswith("top_k")


def test_a_search_that_finds_nothing_says_so_in_the_questions_language(server: ToolServer) -> None:
    """Issue 65: the sentence an agent passes on to its reader follows the question (검색된 문서가 없습니다)."""
    korean = _call(server, "search_documents", query="프린터 드라이버 설치")
    assert korean["count"] == 0 and korean["message"] == say("no_results", "ko") == "검색된 문서가 없습니다."
    assert _call(server, "search_documents", query="nothing here")["message"] == say("no_results", "en")
    assert "message" not in _call(server, "search_documents", query="kernel panic")


def test_tool_errors_say_what_went_wrong_without_a_traceback(server: ToolServer) -> None:
    assert _call(server, "get_document", document_id="d1") == {"document_id": "d1"}
    assert _refused(server, "get_document", document_id="d2") == "document 'd2' not found"
    assert _refused(server, "get_document", document_id=" ").startswith("document_id:")
    assert _refused(server, "list_containers").startswith("the index is not available now: lent to a writer")
    assert _refused(server, "list_containers", prefix="x" * 201) == "prefix: at most 200 characters"
    assert _refused(server, "list_containers", max_depth=-1).startswith("max_depth:")
    assert _refused(server, "list_containers", limit=0).startswith("limit:")
    assert _refused(server, "whoami", person="someone").startswith("person: asking about another person")
    assert _refused(server, "record_tool_outcome", name="nope", success=True) == "name: no indexed tool is named 'nope'"
    assert _refused(server, "rate_document", query="kernel", document_id="d1", grade=7).startswith("grade")
    assert _call(server, "rate_document", query="kernel", document_id="d1", grade=2)["grade"] == 2


def test_a_failed_call_carries_the_exception_type_beside_the_error_flag(server: ToolServer) -> None:
    """The design's structured ``error_details``: the type of the exception behind the failure, the tool and the
    argument at fault, so an agent tells a bad argument from a busy index without parsing the message."""

    class Busy(RecordingBackend):
        def search(self, request: SearchRequest, reader: Reader) -> dict[str, Any]:
            raise IndexUnavailable("lent to a writer")

    busy = build_mcp_server(Busy(), lambda _ctx: READER)
    details = {
        "bad argument": _failed(server, "search_documents", query="kernel", top_k=0)["error_details"],
        "bad date": _failed(server, "search_documents", query="kernel", since="yesterday-ish")["error_details"],
        "wrong type": _failed(server, "search_documents", query=["a", "list"])["error_details"],
        "not found": _failed(server, "get_document", document_id="d2")["error_details"],
        "busy index": _failed(busy, "search_documents", query="kernel")["error_details"],
        "refused": _failed(server, "whoami", person="someone")["error_details"],
    }
    assert details == {
        "bad argument": {"type": "ValidationError", "tool": "search_documents", "field": "top_k"},
        "bad date": {"type": "ValidationError", "tool": "search_documents", "field": "since"},
        "wrong type": {"type": "ValidationError", "tool": "search_documents", "field": "query"},
        "not found": {"type": "ToolError", "tool": "get_document", "field": None},
        "busy index": {"type": "IndexUnavailable", "tool": "search_documents", "field": None},
        "refused": {"type": "AccessRefused", "tool": "whoami", "field": "person"},
    }


def test_an_unexpected_failure_names_its_type_but_never_its_message(backend: RecordingBackend) -> None:
    def broken(_ctx: Any) -> Reader:
        raise RuntimeError("secret path /srv/data/token.txt")

    failed = _failed(build_mcp_server(backend, broken), "search_documents", query="kernel")
    assert failed["error_details"] == {"type": "RuntimeError", "tool": "search_documents", "field": None}
    assert failed["error"] == "the tool failed" and "secret" not in json.dumps(failed)


def test_an_identity_the_service_refuses_is_a_tool_error(backend: RecordingBackend) -> None:
    def refuse(_ctx: Any) -> Reader:
        raise IdentityError(400, "X-User-Id", "X-User-Id must be one id")

    server = build_mcp_server(backend, refuse)
    assert _refused(server, "search_documents", query="kernel") == "X-User-Id must be one id"
    assert backend.calls == []  # nothing ran without a reader


def test_tool_results_keep_only_what_a_model_needs() -> None:
    shaped = tool_result(RESULT)
    assert set(shaped) == {"document_id", "title", "url", "source", "container", "updated", "authors", "score",
                           "passage"}  # fmt: skip
    assert tool_search_result({"mode": "hybrid", "results": []}) == {"mode": "hybrid", "warnings": [], "results": []}


def test_the_stdio_fallback_moves_to_the_index_once_the_service_is_gone(backend: RecordingBackend) -> None:
    running = [True]
    refused = RefusedBesideService(lambda: running[0], "connect the agent to the service's /mcp instead")
    opened: list[RecordingBackend] = []

    def open_local() -> RecordingBackend:
        opened.append(backend)
        return backend

    tools = FallbackTools(refused, open_local)
    request = SearchRequest(query="kernel")
    with pytest.raises(IndexUnavailable, match="connect the agent"):
        tools.search(request, READER)
    assert opened == []  # while the service runs, the index here is never opened
    running[0] = False
    assert tools.search(request, READER)["results"][0]["document_id"] == "d1"
    assert tools.document("d1", READER) == {"document_id": "d1"} and opened == [backend]  # opened once, for good
    with pytest.raises(ServiceGone):
        refused.tree(READER, None)
