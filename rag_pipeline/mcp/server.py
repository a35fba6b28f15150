"""The MCP server both transports serve: it carries the backend and how to find a call's reader, and a tool of
:mod:`rag_pipeline.mcp.tools` reads them back from its context with :func:`wiring`
(:func:`rag_pipeline.mcp.app.build_mcp_server` registers the tools).

A failed call is the protocol's error result (``isError``, the message as text) with the design's structured
``error_details`` beside it in ``structuredContent``: the type of the exception behind the failure, the tool, and
the argument at fault where there is one, so an agent can tell a bad argument from an index that is busy without
reading prose. Nothing of a traceback, and an unexpected failure's own message, never reach the caller.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from rag_pipeline.mcp.backends import ToolBackend
from rag_pipeline.serving.identity import IdentityError, Reader
from rag_pipeline.serving.refusal import first_invalid
from rag_pipeline.sources.registry import searched_sources_phrase

ReaderOf = Callable[["Context[Any, Any]"], Reader]
logger = logging.getLogger(__name__)
# "top_k: must be ..." names its argument first (tools.validated and the tools' own checks write them so).
_FIELD_FIRST = re.compile(r"^([A-Za-z_][\w.-]*): ")

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

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        """The tool's result; a failure is an error result with ``error_details`` (:func:`error_result`), not an
        exception, so the caller gets both the MCP error flag and the exception's type."""
        try:
            return await super().call_tool(name, arguments, context)
        except MCPError:
            raise  # a protocol error (an unknown method, a cancelled request) stays the protocol's
        except Exception as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc, ToolError):
                logger.exception("tool %r failed unexpectedly", name)
            return error_result(name, exc)


def _behind(exc: BaseException) -> BaseException:
    """The exception a tool's failure comes from: the SDK wraps the tool's :class:`ToolError` (``__cause__``), which
    a tool raises ``from None`` over the use case's own exception (still its ``__context__``)."""
    found = exc.__cause__ or exc
    while isinstance(found, ToolError) and (found.__cause__ or found.__context__) is not None:
        found = found.__cause__ or found.__context__  # type: ignore[assignment]
    return found


def _field(behind: BaseException, message: str) -> str | None:
    named = getattr(behind, "field", None)
    if isinstance(named, str) and named:
        return named
    if isinstance(behind, ValidationError) and behind.errors():
        return first_invalid(behind, nowhere="")[0] or None
    first = _FIELD_FIRST.match(message)
    return first.group(1) if first else None


def error_result(tool: str, exc: Exception) -> CallToolResult:
    """A failed call as MCP's error result: the SDK's message as the text content, and ``{"error", "error_details":
    {"type", "tool", "field"}}`` as the structured content."""
    text = str(exc)
    message = text.removeprefix(f"Error executing tool {tool}").removeprefix(": ") or "the tool failed"
    behind = _behind(exc)
    details = {"type": type(behind).__name__, "tool": tool, "field": _field(behind, message)}
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"error": message, "error_details": details},
        is_error=True,
    )


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
