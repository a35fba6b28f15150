"""The search service as Model Context Protocol tools (the official ``mcp`` SDK): ``search_documents`` and
``get_document``, over stdio (``rag-pipeline mcp``) or streamable HTTP mounted in ``rag-pipeline serve`` at
``/mcp``.

The reader is the server's: fixed at start for stdio, the caller's identity headers over HTTP. It is never a
tool argument, so a model cannot widen what it may see by what it writes into a call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from rag_pipeline.serving.identity import IdentityError, Reader
from rag_pipeline.serving.schemas import SearchRequest
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


def build_mcp_server(service: SearchService, reader_of: ReaderOf) -> MCPServer[Any]:
    """An MCP server whose tools search ``service`` as ``reader_of(ctx)`` for each call."""
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
        description="Search Slack threads and Jira issues the caller may read. mode: hybrid (default), vector, "
        "bm25 or reranked. source: slack or jira. since/until: ISO dates of last activity."
    )
    async def search_documents(
        ctx: Context[Any, Any],
        query: str,
        top_k: int = 10,
        source: str | None = None,
        since: str | None = None,
        until: str | None = None,
        mode: str = "hybrid",
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
                }
            )
        except ValidationError as exc:
            raise ToolError(_field_error(exc)) from None
        try:
            served = await anyio.to_thread.run_sync(service.search, request, who.principal)
        except IndexUnavailable as exc:
            raise ToolError(f"the index is not available now: {exc}") from None
        return {
            "mode": served.response.mode,
            "warnings": served.response.warnings,
            "results": [
                {
                    "document_id": r.document_id,
                    "title": r.title,
                    "url": r.url,
                    "source": r.source,
                    "container": r.container,
                    "updated": r.updated,
                    "authors": r.authors,
                    "score": round(r.score, 6),
                    "passage": r.child_text[:SNIPPET_CHARS],
                }
                for r in served.response.results
            ],
        }

    @server.tool(description="One document the caller may read, by the document_id search_documents returned.")
    async def get_document(ctx: Context[Any, Any], document_id: str) -> dict[str, Any]:
        who = reader(ctx)
        if not document_id.strip() or len(document_id) > 1000:
            raise ToolError("document_id: must be a document id from search_documents")
        try:
            document = await anyio.to_thread.run_sync(service.get_document, document_id, who.principal)
        except IndexUnavailable as exc:
            raise ToolError(f"the index is not available now: {exc}") from None
        if document is None:
            raise ToolError(f"document {document_id!r} not found")
        return document.to_dict()

    return server
