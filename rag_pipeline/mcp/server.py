"""The MCP server both transports serve: it carries the backend and how to find a call's reader, and a tool of
:mod:`rag_pipeline.mcp.tools` reads them back from its context with :func:`wiring`
(:func:`rag_pipeline.mcp.app.build_mcp_server` registers the tools)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from rag_pipeline.mcp.backends import ToolBackend
from rag_pipeline.serving.identity import IdentityError, Reader
from rag_pipeline.sources.registry import searched_sources_phrase

ReaderOf = Callable[["Context[Any, Any]"], Reader]

INSTRUCTIONS = (
    "Search what the team wrote in {sources}, as far as the caller may read it. search_documents returns the best "
    "documents with their best passage; get_document returns one document's full text."
)


class ToolServer(MCPServer[Any]):
    """An MCP server whose tools call ``backend`` as ``reader_of(ctx)`` for each call."""

    def __init__(self, backend: ToolBackend, reader_of: ReaderOf) -> None:
        # The SDK logs each failed call at INFO with its message; WARNING keeps the service's log to what needs an
        # operator (and far from anything a caller wrote).
        instructions = INSTRUCTIONS.format(sources=searched_sources_phrase())
        super().__init__(name="rag-pipeline", log_level="WARNING", instructions=instructions)
        self.backend = backend
        self.reader_of = reader_of


def wiring(ctx: Context[Any, Any]) -> tuple[ToolBackend, Reader]:
    """The backend and the reader of the call ``ctx`` belongs to; an identity the service refuses is a tool error
    naming why."""
    server = ctx.mcp_server
    if not isinstance(server, ToolServer):
        raise ToolError("this tool is served by rag-pipeline's own MCP server only")
    try:
        return server.backend, server.reader_of(ctx)
    except IdentityError as exc:
        raise ToolError(str(exc)) from None
