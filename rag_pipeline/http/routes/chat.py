"""``POST /v1/chat/completions`` (OpenAI-compatible): an answer from the caller's documents, citing them, streamed
as server-sent events when asked; with RAG_AGENT the model calls the search tools itself."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response, StreamingResponse

from rag_pipeline.answers.ask import Asked, ask, ask_streaming
from rag_pipeline.answers.generate import Answer, AnswerModel
from rag_pipeline.answers.wording import reader_language, say
from rag_pipeline.http.errors import RequestRefused, llm_failure
from rag_pipeline.http.state import HttpState, caller, http_state
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.serving.answers import RoundsRefused, agent_answer, agent_rounds, question_search, reader_tools
from rag_pipeline.serving.identity import IdentityError, Reader
from rag_pipeline.serving.schemas import ChatRequest
from rag_pipeline.serving.shared_index import IndexUnavailable
from rag_pipeline.serving.tool_selection import agent_tool_finder

router = APIRouter()
ROUTE = "/v1/chat/completions"


def _event(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


def _chain(first: str | Asked, rest: Iterator[str | Asked]) -> Iterator[str | Asked]:
    yield first
    yield from rest


def _usage(answer: Answer) -> dict[str, int]:
    usage = answer.usage
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens}  # fmt: skip


def _rag_fields(asked: Asked) -> dict[str, Any]:
    """What a chat completion carries beside OpenAI's fields: the cited ``sources`` and the answer's metadata."""
    answer = asked.answer
    return {
        "sources": answer.sources_json(),
        "rag": {
            "answer_error": answer.failure,
            "notices": answer.notices,
            "reasoning": answer.reasoning,
            "question": asked.question,
            "context_documents": len(answer.context),
            "invalid_citations": list(answer.invalid_citations),
            "cost_usd": answer.usage.as_dict()["cost_usd"],
            "llm_calls": answer.usage.calls,
        },
    }


def _answer_text(asked: Asked, fixed_language: str | None) -> str:
    """The answer; when the model failed, a notice naming why and the documents found, in the question's language,
    so a chat client that shows only the message still gets them."""
    answer = asked.answer
    if not answer.failure:
        return answer.text
    language = reader_language(asked.question, fixed_language)
    found = "\n".join(f"[{s.number}] {s.title}" + (f" ({s.url})" if s.url else "") for s in answer.sources)
    listed = f"{say('documents_found', language)}\n{found}" if found else say("no_documents_either", language)
    return f"{say('no_answer', language, reason=answer.failure)} {listed}"


def _message(asked: Asked, fixed_language: str | None) -> dict[str, Any]:
    """The assistant's message; the model's reasoning as ``reasoning_content`` where it gave one (the field
    OpenAI-compatible reasoning servers use, so their clients find it where they look)."""
    message: dict[str, Any] = {"role": "assistant", "content": _answer_text(asked, fixed_language)}
    if asked.answer.reasoning:
        message["reasoning_content"] = asked.answer.reasoning
    return message


def _completion(completion_id: str, created: int, asked: Asked, fixed_language: str | None) -> dict[str, Any]:
    answer = asked.answer
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": answer.model,
        "choices": [
            {
                "index": 0,
                "message": _message(asked, fixed_language),
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(answer),
        **_rag_fields(asked),
    }


def chat_search(state: HttpState, reader: Reader) -> Callable[[str], list[SearchResult]]:
    """The search a chat answer runs for the (condensed) question: reranked, rewritten where a rewriter is set."""
    plan = state.planned if state.rewriter is not None else None
    return question_search(
        state.service, reader.principal, "reranked", state.answer_limits.documents, plan=plan, observe=state.observed
    )


async def agent_completion(
    state: HttpState,
    request: ChatRequest,
    reader: Reader,
    model: AnswerModel,
    ids: tuple[str, int],
    rounds: int,
) -> Response:
    """The answer of a model that calls the tools itself (RAG_AGENT) in at most ``rounds`` rounds; streamed as one
    piece when asked to. A model failing before its first tool call leaves the chat answer's documents."""
    completion_id, created = ids
    service = state.service
    finder = agent_tool_finder(service, reader.principal) if service.tool_search.config.agent_tool_search else None
    tools = reader_tools(service, reader.principal, observe=state.observed, find_tools=finder)
    limits, fallback = state.answer_limits, chat_search(state, reader)
    agent = await anyio.to_thread.run_sync(
        lambda: agent_answer(model, tools, request.turns(), rounds, limits, fallback), limiter=state.search_threads
    )
    state.observe_answer(ROUTE, agent.answer, agent.seconds)
    asked = Asked(agent.question, agent.results, agent.answer, agent.seconds)
    extra = {"tool_calls": [c.as_dict() for c in agent.tool_calls], "max_iterations": rounds,
             "fell_back": agent.fell_back, "active_tools": agent.active_tools}  # fmt: skip
    if not request.stream:
        body = _completion(completion_id, created, asked, model.language)
        body["rag"].update(extra)
        return JSONResponse(body)
    base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model.model}

    def events() -> Iterator[str]:
        yield _event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                          "finish_reason": None}]})  # fmt: skip
        delta = _message(asked, model.language)
        del delta["role"]
        yield _event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], **_rag_fields(asked)}
        final["rag"].update(extra)
        yield _event(final)
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _failed(state: HttpState, started: float) -> None:
    state.metrics.observe_answer(ROUTE, "failed", 0, 0, None, 0, time.perf_counter() - started)


@router.post(ROUTE, response_model=None)
async def chat_completions(
    request: ChatRequest, reader: Reader = Depends(caller), state: HttpState = Depends(http_state)
) -> Response:
    try:
        rounds = agent_rounds(request.max_iterations, state.agent_rounds)
    except RoundsRefused as refused:
        raise RequestRefused(422, refused.field, str(refused)) from None
    model = state.answer_model(request.model)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    if rounds is not None:
        return await agent_completion(state, request, reader, model, (completion_id, created), rounds)
    search = chat_search(state, reader)
    limits, tracing = state.answer_limits, state.tracing
    started = time.perf_counter()
    if not request.stream:
        try:
            asked = await anyio.to_thread.run_sync(
                lambda: ask(model, search, request.turns(), limits), limiter=state.search_threads
            )
        except (IndexUnavailable, RequestRefused, IdentityError):
            raise
        except Exception as exc:
            _failed(state, started)
            raise llm_failure(exc) from None
        state.observe_answer(ROUTE, asked.answer, asked.answer_seconds)
        tracing.ended_stage("generate", asked.answer_seconds, model=model.model)
        return JSONResponse(_completion(completion_id, created, asked, model.language))
    pieces = ask_streaming(model, search, request.turns(), limits)
    try:
        # The question is condensed, searched and the first words written before the response starts, so a
        # failure there is still a proper error status rather than a broken stream.
        first = await anyio.to_thread.run_sync(lambda: next(pieces), limiter=state.search_threads)
    except (IndexUnavailable, RequestRefused, IdentityError):
        raise
    except Exception as exc:
        _failed(state, started)
        raise llm_failure(exc) from None
    include_usage = bool(request.stream_options and request.stream_options.include_usage)

    def events() -> Iterator[str]:
        base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model.model}
        yield _event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                          "finish_reason": None}]})  # fmt: skip
        try:
            for piece in _chain(first, pieces):
                if isinstance(piece, Asked):
                    state.observe_answer(ROUTE, piece.answer, piece.answer_seconds)
                    tracing.ended_stage("generate", piece.answer_seconds, model=model.model)
                    if piece.answer.failure:  # the notice, after any words the model wrote before it failed
                        notice = ("\n\n" if piece.answer.text else "") + _answer_text(piece, model.language)
                        yield _event({**base, "choices": [{"index": 0, "delta": {"content": notice},
                                                          "finish_reason": None}]})  # fmt: skip
                    final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                    yield _event({**final, **_rag_fields(piece)})
                    if include_usage:
                        yield _event({**base, "choices": [], "usage": _usage(piece.answer)})
                else:
                    yield _event({**base, "choices": [{"index": 0, "delta": {"content": piece},
                                                      "finish_reason": None}]})  # fmt: skip
        except Exception as exc:  # the status is sent already: the stream ends with an error event
            refused = llm_failure(exc)
            _failed(state, started)
            yield _event({"error": {"message": str(refused), "type": "server_error", "param": refused.field}})
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
