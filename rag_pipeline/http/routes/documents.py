"""``GET /v1/documents/{id}`` (one document the caller may read; 404 alike for missing and forbidden) and
``GET /v1/tree`` (the caller's sources, containers and counts, and the deeper tree's nodes: documents, Confluence
pages under their parents, from ``root_path`` down ``max_depth`` levels, a page of ``limit`` from ``offset``)."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from rag_pipeline.http.errors import error
from rag_pipeline.http.state import HttpState, caller, http_state
from rag_pipeline.retrieval.tree import tree_json
from rag_pipeline.retrieval.tree_view import (
    DEFAULT_TREE_DEPTH,
    DEFAULT_TREE_LIMIT,
    MAX_TREE_DEPTH,
    MAX_TREE_LIMIT,
    TreeView,
)
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
    root_path: str | None = Query(None, min_length=1, max_length=1000),
    max_depth: int = Query(DEFAULT_TREE_DEPTH, ge=0, le=MAX_TREE_DEPTH),
    offset: int = Query(0, ge=0),
    limit: int = Query(DEFAULT_TREE_LIMIT, ge=1, le=MAX_TREE_LIMIT),
    reader: Reader = Depends(caller),
    state: HttpState = Depends(http_state),
) -> JSONResponse:
    view = TreeView(root_path=root_path, max_depth=max_depth, offset=offset, limit=limit)
    nodes, page = await anyio.to_thread.run_sync(
        state.service.tree_view, reader.principal, prefix, view, limiter=state.search_threads
    )
    # ``prefix`` and ``sources`` as before (clients read them); the deeper tree beside them.
    return JSONResponse({"reader": reader.describe(), "prefix": prefix, "sources": tree_json(nodes), **page.to_dict()})
