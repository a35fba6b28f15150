"""``POST /v1/search``: the caller's search (rewritten first when asked), and with ``"answer": true`` an answer
citing its sources."""

from __future__ import annotations

import time
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Request

from rag_pipeline.answers.ask import answer_results
from rag_pipeline.http.errors import RequestRefused
from rag_pipeline.http.state import TOKEN_SCOPES_KEY, HttpState, caller, http_state
from rag_pipeline.serving.answers import answer_fields
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.schemas import SearchRequest
from rag_pipeline.serving.search import search_body

router = APIRouter()


@router.post("/v1/search")
async def search(
    request: SearchRequest,
    http_request: Request,
    reader: Reader = Depends(caller),
    state: HttpState = Depends(http_state),
) -> dict[str, Any]:
    scopes = http_request.scope.get(TOKEN_SCOPES_KEY)
    if request.answer and scopes is not None and "answer" not in scopes:
        raise RequestRefused(403, "answer", f"this personal token has no 'answer' scope (it has: {', '.join(scopes)})")
    # Without a rewriter, state.planned refuses naming `rewrite` (503) before anything is searched.
    plan = await anyio.to_thread.run_sync(state.planned, request.query) if request.rewrite else None
    served = await anyio.to_thread.run_sync(
        state.service.search, request, reader.principal, plan, limiter=state.search_threads
    )
    response = state.observed(served)
    body = search_body(request, served, reader.describe())
    if request.answer:
        model = state.answer_model(None)
        started = time.perf_counter()
        # A model that fails leaves the answer null with the reason beside the sources (HTTP 200).
        with state.tracing.stage("generate", model=model.model):
            answer = await anyio.to_thread.run_sync(
                lambda: answer_results(model, request.query, response.results, state.answer_limits)
            )
        state.observe_answer("/v1/search", answer, time.perf_counter() - started)
        body.update(answer_fields(answer))
    return body
