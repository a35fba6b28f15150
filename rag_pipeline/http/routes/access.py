"""``GET /v1/whois`` (the caller's accounts and groups, with the grant behind each) and
``GET /v1/explain/{id}`` (why the caller, or for admins ``?person=``, may or may not read a document)."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from rag_pipeline.http.errors import error
from rag_pipeline.http.routes.documents import MAX_DOCUMENT_ID
from rag_pipeline.http.state import HttpState, caller, http_state
from rag_pipeline.serving.access import AccessRefused
from rag_pipeline.serving.identity import Reader

router = APIRouter()


@router.get("/v1/whois")
async def whois(
    person: str | None = Query(None, min_length=1, max_length=320),
    reader: Reader = Depends(caller),
    state: HttpState = Depends(http_state),
) -> JSONResponse:
    """The caller's accounts, groups (with the grant behind each) and private channels; another person's
    with ``?person=`` for admins."""
    try:
        return JSONResponse(await anyio.to_thread.run_sync(state.access.whois, reader, person))
    except AccessRefused as exc:
        return error(exc.status, str(exc), exc.field)


@router.get("/v1/explain/{document_id:path}")
async def explain_access(
    document_id: str,
    person: str | None = Query(None, min_length=1, max_length=320),
    reader: Reader = Depends(caller),
    state: HttpState = Depends(http_state),
) -> JSONResponse:
    """Why the caller may read a document (404 for one they may not, as /v1/documents); for admins, about
    ``?person=``, hidden documents included, with the restriction that hides them."""
    if len(document_id) > MAX_DOCUMENT_ID:
        return error(422, f"document_id: at most {MAX_DOCUMENT_ID} characters", "document_id")
    try:
        answer = await anyio.to_thread.run_sync(
            state.access.explain, document_id, reader, person, limiter=state.search_threads
        )
    except AccessRefused as exc:
        return error(exc.status, str(exc), exc.field)
    return JSONResponse(answer)
