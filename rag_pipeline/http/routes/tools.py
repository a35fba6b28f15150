"""``POST /v1/tools/search`` (the few tools a task needs, and the prompt tokens they save) and
``POST /v1/tools/{name}/outcome`` (whether calling a tool worked)."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Depends
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse

from rag_pipeline.http.errors import error
from rag_pipeline.http.state import HttpState, caller, http_state
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.schemas import ToolOutcomeRequest, ToolSearchRequest

router = APIRouter()


@router.post("/v1/tools/search")
async def search_tools(
    request: ToolSearchRequest, reader: Reader = Depends(caller), state: HttpState = Depends(http_state)
) -> JSONResponse:
    """The few tools a task needs, with the prompt tokens they cost against loading every tool."""
    found = await anyio.to_thread.run_sync(
        state.service.search_tools, request, reader.principal, limiter=state.search_threads
    )
    return JSONResponse(found.to_dict())


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
