"""``POST /v1/feedback``: a reader's judgement of a document they were shown (opt-in: ``RAG_FEEDBACK_DAYS``)."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from rag_pipeline.http.errors import error
from rag_pipeline.http.state import HttpState, caller, http_state
from rag_pipeline.serving.feedback import FeedbackDisabled
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.schemas import FeedbackRequest

router = APIRouter()


@router.post("/v1/feedback")
async def feedback(
    request: FeedbackRequest, reader: Reader = Depends(caller), state: HttpState = Depends(http_state)
) -> JSONResponse:
    """Record how relevant ``document_id`` was to ``query`` (grade 0-2); the reader must be able to read it."""
    try:
        recorded = await anyio.to_thread.run_sync(
            state.service.record_feedback, request, reader.principal, limiter=state.search_threads
        )
    except FeedbackDisabled as exc:
        return error(404, str(exc), None, "/v1/feedback")
    if recorded is None:
        # Missing and forbidden read the same, as GET /v1/documents: no probing for documents by feedback.
        return error(404, f"document {request.document_id!r} not found", "document_id", "/v1/feedback")
    return JSONResponse(recorded)
