"""``GET /v1/documents/{id}`` (one document the caller may read; 404 alike for missing and forbidden) and
``GET /v1/tree`` (the caller's sources, containers and counts)."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from rag_pipeline.http.errors import error
from rag_pipeline.http.state import HttpState, caller, http_state
from rag_pipeline.retrieval.tree import tree_json
from rag_pipeline.serving.identity import Reader

router = APIRouter()
MAX_DOCUMENT_ID = 1000


@router.get("/v1/documents/{document_id:path}")
async def document(
    document_id: str, reader: Reader = Depends(caller), state: HttpState = Depends(http_state)
) -> JSONResponse:
    if len(document_id) > MAX_DOCUMENT_ID:
        return error(422, f"document_id: at most {MAX_DOCUMENT_ID} characters", "document_id")
    found = await anyio.to_thread.run_sync(
        state.service.get_document, document_id, reader.principal, limiter=state.search_threads
    )
    if found is None:
        # Missing and forbidden read the same, so a caller cannot probe for documents it may not see.
        return error(404, f"document {document_id!r} not found", "document_id")
    return JSONResponse(found.to_dict())


@router.get("/v1/tree")
async def tree(
    prefix: str | None = Query(None, min_length=1, max_length=200),
    reader: Reader = Depends(caller),
    state: HttpState = Depends(http_state),
) -> JSONResponse:
    nodes = await anyio.to_thread.run_sync(state.service.tree, reader.principal, prefix, limiter=state.search_threads)
    return JSONResponse({"reader": reader.describe(), "prefix": prefix, "sources": tree_json(nodes)})
