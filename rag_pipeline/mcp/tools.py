"""The search service as Model Context Protocol tools (the official ``mcp`` SDK): ``search_documents``,
``get_document``, ``whoami`` and ``explain_access``, over stdio (``rag-pipeline mcp``) or streamable HTTP
mounted in ``rag-pipeline serve`` at ``/mcp``.

The reader is the server's: fixed at start for stdio, the caller's identity headers over HTTP. It is never a
tool argument, so a model cannot widen what it may see by what it writes into a call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from rag_pipeline.retrieval.tree import tree_json
from rag_pipeline.serving.access import AccessQueries, AccessRefused
from rag_pipeline.serving.feedback import FeedbackDisabled
from rag_pipeline.serving.identity import IdentityError, Reader
from rag_pipeline.serving.schemas import FeedbackRequest, SearchRequest, ToolOutcomeRequest, ToolSearchRequest
from rag_pipeline.serving.service import SearchService
from rag_pipeline.serving.shared_index import IndexUnavailable

# A tool result lands in a model's context window: fewer, shorter results than the HTTP API's.
MAX_TOOL_TOP_K = 50
SNIPPET_CHARS = 1200

ReaderOf = Callable[["Context[Any, Any]"], Reader]


def _field_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or "arguments"
    return f"{field}: {first.get('msg', 'invalid value')}"


class ToolBackend(Protocol):
    """Where the tools' searches run: this process's :class:`SearchService` (:class:`LocalTools`), or a running
    ``rag-pipeline serve`` of the same folder over HTTP (:class:`RemoteTools`, for the stdio server)."""

    def search(self, request: SearchRequest, reader: Reader) -> dict[str, Any]: ...

    def document(self, document_id: str, reader: Reader) -> dict[str, Any] | None: ...

    def whois(self, reader: Reader, person: str | None) -> dict[str, Any]: ...

    def tree(self, reader: Reader, prefix: str | None) -> list[dict[str, Any]]: ...

    def explain(self, document_id: str, reader: Reader, person: str | None) -> dict[str, Any]: ...

    def search_tools(self, request: ToolSearchRequest, reader: Reader) -> dict[str, Any]: ...

    def tool_outcome(self, name: str, request: ToolOutcomeRequest, reader: Reader) -> dict[str, Any] | None:
        """The tool's record after counting the call; None when no indexed tool has that name."""
        ...

    def feedback(self, request: FeedbackRequest, reader: Reader) -> dict[str, Any] | None:
        """The judgement as kept; None when the document is missing or the reader may not read it;
        :class:`~rag_pipeline.serving.feedback.FeedbackDisabled` when feedback is off."""
        ...


def tool_result(result: dict[str, Any]) -> dict[str, Any]:
    """One search result as a tool returns it (``result`` as the HTTP API writes it)."""
    return {
        "document_id": result["document_id"],
        "title": result["title"],
        "url": result["url"],
        "source": result["source"],
        "container": result["container"],
        "updated": result["updated"],
        "authors": result["authors"],
        "score": round(float(result["score"]), 6),
        "passage": (result.get("child_text") or "")[:SNIPPET_CHARS],
    }


class LocalTools:
    """The tools over this process's :class:`SearchService`, and ``whois``/``explain`` over ``access``."""

    def __init__(self, service: SearchService, access: AccessQueries) -> None:
        self.service = service
        self.access = access

    def search(self, request: SearchRequest, reader: Reader) -> dict[str, Any]:
        served = self.service.search(request, reader.principal)
        return {
            "mode": served.response.mode,
            "warnings": served.response.warnings,
            "results": [tool_result(r.to_dict()) for r in served.response.results],
        }

    def document(self, document_id: str, reader: Reader) -> dict[str, Any] | None:
        found = self.service.get_document(document_id, reader.principal)
        return None if found is None else found.to_dict()

    def whois(self, reader: Reader, person: str | None) -> dict[str, Any]:
        return self.access.whois(reader, person)

    def tree(self, reader: Reader, prefix: str | None) -> list[dict[str, Any]]:
        return tree_json(self.service.tree(reader.principal, prefix))

    def explain(self, document_id: str, reader: Reader, person: str | None) -> dict[str, Any]:
        return self.access.explain(document_id, reader, person)

    def search_tools(self, request: ToolSearchRequest, reader: Reader) -> dict[str, Any]:
        return self.service.search_tools(request, reader.principal).to_dict()

    def tool_outcome(self, name: str, request: ToolOutcomeRequest, reader: Reader) -> dict[str, Any] | None:
        try:
            return self.service.record_tool_outcome(name, request)
        except KeyError:
            return None

    def feedback(self, request: FeedbackRequest, reader: Reader) -> dict[str, Any] | None:
        return self.service.record_feedback(request, reader.principal)


def build_mcp_server(backend: ToolBackend, reader_of: ReaderOf) -> MCPServer[Any]:
    """An MCP server whose tools search ``backend`` as ``reader_of(ctx)`` for each call."""
    server: MCPServer[Any] = MCPServer(
        name="rag-pipeline",
        # The SDK logs each failed call at INFO with its message; WARNING keeps the service's log to what needs
        # an operator (and far from anything a caller wrote).
        log_level="WARNING",
        instructions="Search the team's Slack threads and Jira issues the caller may read. search_documents "
        "returns the best documents with their best passage; get_document returns one document's full text.",
    )

    def reader(ctx: Context[Any, Any]) -> Reader:
        try:
            return reader_of(ctx)
        except IdentityError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(
        description="Search Slack threads and Jira issues the caller may read. mode: routed (default: hybrid with "
        "issue keys, links and ids looked up exactly first), hybrid, vector, bm25 or reranked. source: slack or "
        "jira. since/until: ISO dates of last activity. min_score: 0-1, drop results less likely relevant than "
        "this (each result's relevance)."
    )
    async def search_documents(
        ctx: Context[Any, Any],
        query: str,
        top_k: int = 10,
        source: str | None = None,
        since: str | None = None,
        until: str | None = None,
        mode: str = "routed",
        min_score: float | None = None,
        path: str | None = None,
    ) -> dict[str, Any]:
        who = reader(ctx)
        try:
            request = SearchRequest.model_validate(
                {
                    "query": query,
                    "top_k": min(top_k, MAX_TOOL_TOP_K) if top_k >= 1 else top_k,
                    "source": source,
                    "since": since,
                    "until": until,
                    "mode": mode,
                    "min_score": min_score,
                    "path": path,
                }
            )
        except ValidationError as exc:
            raise ToolError(_field_error(exc)) from None
        started = time.perf_counter()
        try:
            found = await anyio.to_thread.run_sync(backend.search, request, who)
        except IndexUnavailable as exc:
            raise ToolError(f"the index is not available now: {exc}") from None
        # The design's tool-result shape: the query echoed, how many results, the mode that ran, the time taken.
        return {
            "query": request.query,
            "mode": found["mode"],
            "count": len(found["results"]),
            "execution_time_ms": round((time.perf_counter() - started) * 1000, 1),
            "warnings": found.get("warnings", []),
            "results": found["results"],
        }

    @server.tool(
        description="What the caller can search: sources, then channels/projects with their document counts and "
        "latest activity, only where the caller may read a document. prefix: a path's beginning (slack/#eng, "
        "jira/OPS); search_documents takes the same as path."
    )
    async def list_containers(ctx: Context[Any, Any], prefix: str | None = None) -> dict[str, Any]:
        who = reader(ctx)
        if prefix is not None and len(prefix) > 200:
            raise ToolError("prefix: at most 200 characters")
        try:
            sources = await anyio.to_thread.run_sync(backend.tree, who, prefix)
        except IndexUnavailable as exc:
            raise ToolError(f"the index is not available now: {exc}") from None
        return {"prefix": prefix, "sources": sources}

    @server.tool(
        description="The few tools a task needs, out of every tool indexed (a catalog and MCP servers): each with "
        "its description and input schema, ranked by 0.5 semantic match + 0.3 usage + 0.2 success, the critical "
        "ones always included, and the prompt tokens they cost against loading every tool. mode: multi-signal "
        "(default), vector, bm25 or hybrid."
    )
    async def search_tools(
        ctx: Context[Any, Any], query: str, top_k: int | None = None, mode: str = "multi-signal"
    ) -> dict[str, Any]:
        who = reader(ctx)
        try:
            request = ToolSearchRequest.model_validate({"query": query, "top_k": top_k, "mode": mode})
        except ValidationError as exc:
            raise ToolError(_field_error(exc)) from None
        try:
            return await anyio.to_thread.run_sync(backend.search_tools, request, who)
        except IndexUnavailable as exc:
            raise ToolError(f"the index is not available now: {exc}") from None

    @server.tool(
        description="Record whether calling a tool (a name search_tools returned) worked; tool search ranks tools "
        "that get used and work higher."
    )
    async def record_tool_outcome(ctx: Context[Any, Any], name: str, success: bool, calls: int = 1) -> dict[str, Any]:
        who = reader(ctx)
        try:
            request = ToolOutcomeRequest.model_validate({"success": success, "calls": calls})
        except ValidationError as exc:
            raise ToolError(_field_error(exc)) from None
        if not name or len(name) > 200:
            raise ToolError("name: 1-200 characters")
        try:
            recorded = await anyio.to_thread.run_sync(backend.tool_outcome, name, request, who)
        except IndexUnavailable as exc:
            raise ToolError(f"the index is not available now: {exc}") from None
        if recorded is None:
            raise ToolError(f"name: no indexed tool is named {name!r}")
        return recorded

    @server.tool(
        description="Say how relevant a document search_documents returned was to what the caller asked: grade 0 "
        "(not relevant), 1 (relevant) or 2 (exactly what was needed). Kept only where the operator turned readers' "
        "feedback on; it becomes an eval set of real questions."
    )
    async def rate_document(ctx: Context[Any, Any], query: str, document_id: str, grade: int) -> dict[str, Any]:
        who = reader(ctx)
        try:
            request = FeedbackRequest.model_validate({"query": query, "document_id": document_id, "grade": grade})
        except ValidationError as exc:
            raise ToolError(_field_error(exc)) from None
        try:
            recorded = await anyio.to_thread.run_sync(backend.feedback, request, who)
        except (IndexUnavailable, FeedbackDisabled) as exc:
            raise ToolError(str(exc)) from None
        if recorded is None:
            raise ToolError(f"document {document_id!r} not found")
        return recorded

    @server.tool(description="One document the caller may read, by the document_id search_documents returned.")
    async def get_document(ctx: Context[Any, Any], document_id: str) -> dict[str, Any]:
        who = reader(ctx)
        if not document_id.strip() or len(document_id) > 1000:
            raise ToolError("document_id: must be a document id from search_documents")
        try:
            document = await anyio.to_thread.run_sync(backend.document, document_id, who)
        except IndexUnavailable as exc:
            raise ToolError(f"the index is not available now: {exc}") from None
        if document is None:
            raise ToolError(f"document {document_id!r} not found")
        return document

    @server.tool(
        description="Who the caller is to the search: their accounts, the groups they hold (and the grant behind "
        "each), their private channels, and when each source's directory was synced. person: another person's "
        "email or account id (admins only)."
    )
    async def whoami(ctx: Context[Any, Any], person: str | None = None) -> dict[str, Any]:
        who = reader(ctx)
        try:
            return await anyio.to_thread.run_sync(backend.whois, who, person)
        except AccessRefused as exc:
            raise ToolError(f"{exc.field}: {exc}") from None
        except IndexUnavailable as exc:
            raise ToolError(f"the search service is not available now: {exc}") from None

    @server.tool(
        description="Why the caller may read a document (the grant that admits it). A document the caller may not "
        "read is reported as not found. person: another person (admins only), for whom a hidden document's "
        "restriction is named."
    )
    async def explain_access(ctx: Context[Any, Any], document_id: str, person: str | None = None) -> dict[str, Any]:
        who = reader(ctx)
        if not document_id.strip() or len(document_id) > 1000:
            raise ToolError("document_id: must be a document id from search_documents")
        try:
            return await anyio.to_thread.run_sync(backend.explain, document_id, who, person)
        except AccessRefused as exc:
            raise ToolError(f"{exc.field}: {exc}") from None
        except IndexUnavailable as exc:
            raise ToolError(f"the index is not available now: {exc}") from None

    return server
