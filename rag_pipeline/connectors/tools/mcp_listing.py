"""The tools an MCP server offers, read with the official ``mcp`` client over Streamable HTTP (``tools/list``,
every page)."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp import Client

from rag_pipeline.connectors.tools.catalog import ToolDefinition, parse_tool

# A server that pages forever is cut off here (and reported by the caller as partial).
MAX_PAGES = 100


class ServerListingError(RuntimeError):
    """An MCP server could not be listed: the message names the server and what failed."""


async def _list(url: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = []
    async with Client(url) as client:
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            listed.extend(tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
    return listed


def _first_leaf(exc: BaseException) -> BaseException:
    """The first real error inside the task groups the client's transport nests it in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def list_server_tools(url: str, timeout_seconds: float) -> tuple[list[ToolDefinition], list[tuple[str, str]]]:
    """The server's tools, and (tool name or position, reason) for each listed tool that is not a valid one;
    :class:`ServerListingError` when the server cannot be reached or answers with something other than MCP."""

    async def bounded() -> list[dict[str, Any]]:
        return await asyncio.wait_for(_list(url), timeout_seconds)

    try:
        listed = asyncio.run(bounded())
    except TimeoutError:
        raise ServerListingError(f"MCP server {url} did not list its tools within {timeout_seconds:g} s") from None
    except Exception as exc:  # any transport or protocol failure is this server's, reported by name
        cause = _first_leaf(exc)
        raise ServerListingError(f"MCP server {url} could not be listed: {type(cause).__name__}: {cause}") from None
    tools: list[ToolDefinition] = []
    bad: list[tuple[str, str]] = []
    for i, raw in enumerate(listed):
        try:
            tools.append(parse_tool(raw, server=url))
        except ValueError as exc:
            bad.append((str(raw.get("name") or f"#{i + 1}"), str(exc)))
    return tools, bad
