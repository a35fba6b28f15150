"""``POST /v1/tools/search`` (the few tools a task needs, and the prompt tokens they save), ``POST
/v1/tools/{name}/outcome`` (whether calling a tool worked), and the caller's active tool set: ``GET
/v1/tools/active``, ``POST /v1/tools/active`` (activate), ``POST /v1/tools/active/deactivate`` and ``POST
/v1/tools/active/reset``. The set is the caller's, per ``X-Session-Id`` where the client sends one
(serving/tool_selection.py)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Header
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse

from rag_pipeline.http.errors import error
from rag_pipeline.http.state import HttpState, caller, http_state
from rag_pipeline.serving.active_tools import ActiveSetRefused, CallerKey
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.schemas import ActiveToolsRequest, ToolOutcomeRequest, ToolSearchRequest
from rag_pipeline.serving.tool_selection import ActiveAction, change_active_tools, find_tools

router = APIRouter()
MAX_SESSION_CHARS = 200


def active_set_key(
    reader: Reader = Depends(caller), x_session_id: str | None = Header(None, max_length=MAX_SESSION_CHARS)
) -> CallerKey:
    """Whose active tool set a request reads or changes: the caller's, kept apart per client session
    (``X-Session-Id``) where the client names one."""
    return CallerKey.of(reader.principal, x_session_id or "")


@router.post("/v1/tools/search")
async def search_tools(
    request: ToolSearchRequest,
    reader: Reader = Depends(caller),
    key: CallerKey = Depends(active_set_key),
    state: HttpState = Depends(http_state),
) -> JSONResponse:
    """The few tools a task needs (those already active left out), with the prompt tokens they cost against loading
    every tool."""
    service = state.service
    found = await anyio.to_thread.run_sync(
        lambda: find_tools(service, service.active_tools, key, request, reader.principal),
        limiter=state.search_threads,
    )
    return JSONResponse(found)


async def _active(state: HttpState, key: CallerKey, action: ActiveAction, names: list[str], path: str) -> JSONResponse:
    service = state.service

    def change() -> dict[str, Any]:
        return change_active_tools(service, service.active_tools, key, action, names)

    try:
        changed = await anyio.to_thread.run_sync(change, limiter=state.search_threads)
    except ActiveSetRefused as exc:
        return error(exc.status, str(exc), exc.field, path)
    return JSONResponse(changed)


@router.get("/v1/tools/active")
async def active_tools(
    key: CallerKey = Depends(active_set_key), state: HttpState = Depends(http_state)
) -> JSONResponse:
    """The caller's active tools (the critical set until it activates others)."""
    return await _active(state, key, "get", [], "/v1/tools/active")


@router.post("/v1/tools/active")
async def activate_tools(
    request: ActiveToolsRequest, key: CallerKey = Depends(active_set_key), state: HttpState = Depends(http_state)
) -> JSONResponse:
    """Add indexed tools to the caller's active set: 404 naming ``names`` for an unknown one, 409 over the bound."""
    return await _active(state, key, "activate", request.names, "/v1/tools/active")


@router.post("/v1/tools/active/deactivate")
async def deactivate_tools(
    request: ActiveToolsRequest, key: CallerKey = Depends(active_set_key), state: HttpState = Depends(http_state)
) -> JSONResponse:
    """Remove tools from the caller's active set."""
    return await _active(state, key, "deactivate", request.names, "/v1/tools/active/deactivate")


@router.post("/v1/tools/active/reset")
async def reset_active_tools(
    key: CallerKey = Depends(active_set_key), state: HttpState = Depends(http_state)
) -> JSONResponse:
    """The caller's active set back to the critical set."""
    return await _active(state, key, "reset", [], "/v1/tools/active/reset")


@router.post("/v1/tools/{name}/outcome")
async def tool_outcome(
    request: ToolOutcomeRequest,
    name: str = PathParam(min_length=1, max_length=200),
    reader: Reader = Depends(caller),
    state: HttpState = Depends(http_state),
) -> JSONResponse:
    """Record whether calling a tool worked: tool search ranks tools that get used and work higher."""
    try:
        recorded = await anyio.to_thread.run_sync(
            state.service.record_tool_outcome, name, request, limiter=state.search_threads
        )
    except KeyError:
        return error(404, f"no indexed tool is named {name!r}", "name", f"/v1/tools/{name}/outcome")
    return JSONResponse(recorded)
