"""The MCP app: :func:`build_mcp_server` registers every tool of :mod:`rag_pipeline.mcp.tools` on a
:class:`~rag_pipeline.mcp.server.ToolServer`; ``rag-pipeline mcp`` runs it over stdio, ``rag-pipeline serve`` mounts
its streamable HTTP app at ``/mcp``."""

from __future__ import annotations

from rag_pipeline.mcp.backends import ToolBackend
from rag_pipeline.mcp.server import ReaderOf, ToolServer
from rag_pipeline.mcp.tools import TOOLS
from rag_pipeline.sources.registry import document_sources, searched_sources_phrase


def tool_description(tool: object) -> str:
    """A tool's description as a model reads it: its docstring on one line, naming the registered sources."""
    text = " ".join((getattr(tool, "__doc__", None) or "").split())
    return text.format(sources=searched_sources_phrase(), source_names=", ".join(document_sources()))


def build_mcp_server(backend: ToolBackend, reader_of: ReaderOf) -> ToolServer:
    """An MCP server with every tool, searching ``backend`` as ``reader_of(ctx)`` for each call."""
    server = ToolServer(backend, reader_of)
    for tool in TOOLS:
        server.add_tool(tool, description=tool_description(tool))
    return server
