"""``POST /v1/search``: the caller's search (rewritten first when asked), and with ``"answer": true`` an answer
citing its sources."""

from __future__ import annotations

import time
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Request

from rag_pipeline.answers.ask import answer_results
from rag_pipeline.answers.generate import Answer
from rag_pipeline.http.errors import RequestRefused
from rag_pipeline.http.state import TOKEN_SCOPES_KEY, HttpState, caller, http_state
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.schemas import SearchRequest

router = APIRouter()


def answer_fields(answer: Answer) -> dict[str, Any]:
    """What ``"answer": true`` adds to a search's body."""
    return {
        "answer": None if answer.failure else answer.text,
        "answer_error": answer.failure,
        "notices": answer.notices,
        "sources": answer.sources_json(),
        "answer_metadata": {
            "model": answer.model,
            "context_documents": len(answer.context),
            "invalid_citations": list(answer.invalid_citations),
            **answer.usage.as_dict(),
        },
    }


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
    plan = None
    if request.rewrite:
        if state.rewriter is None:
            raise RequestRefused(503, "rewrite", "rewriting is off: set RAG_REWRITE_MODEL on the service")
        rewriter = state.rewriter
        with state.tracing.stage("rewrite"):
            plan = await anyio.to_thread.run_sync(rewriter.plan, request.query)
        state.observe_rewrite(plan)
    served = await anyio.to_thread.run_sync(
        state.service.search, request, reader.principal, plan, limiter=state.search_threads
    )
    response = state.observed(served)
    body: dict[str, Any] = {
        "query": request.query,
        "mode": response.mode,
        "requested_mode": response.requested_mode,
        "reranker": served.reranker,
        "warnings": response.warnings,
        "reader": reader.describe(),
        "results": [r.to_dict() for r in response.results],
        "timing_ms": served.timing_ms,
        "cached": served.cached,
    }
    if served.rewrite is not None:
        body["rewrite"] = served.rewrite
    if response.route is not None:
        body["route"] = response.route
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
