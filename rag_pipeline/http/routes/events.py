"""Pushed changes: ``POST /events/{source}`` — Slack's Events API Request URL (``/events/slack``), Jira's and
Confluence's webhook URLs (``/events/jira``, ``/events/confluence``). Outside ``/v1``: their callers are the products,
which prove themselves by signature or shared secret (each connector's receiver checks), never by the readers'
tokens, and each receiver has its own body limit. Every request is answered at once; the sync it asks for is queued
(:mod:`rag_pipeline.serving.live_events`). A source whose secret is not set answers 404 naming the variable."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from rag_pipeline.http.errors import error
from rag_pipeline.http.state import HttpState, http_state
from rag_pipeline.serving.event_receivers import off_message
from rag_pipeline.sources.pushed import PushRefused

PREFIX = "/events/"
router = APIRouter()


def is_event_path(path: str) -> bool:
    """Whether ``path`` is one of these routes (the guard leaves their authentication to the receivers)."""
    return path.startswith(PREFIX)


async def _body(request: Request, limit: int) -> bytes:
    """The body, refused past ``limit`` bytes (declared, or counted as it arrives)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise PushRefused(413, f"the request body is over {limit} bytes", "body")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PushRefused(413, f"the request body is over {limit} bytes", "body")
        chunks.append(chunk)
    return b"".join(chunks)


@router.post(PREFIX + "{source}")
async def pushed_change(source: str, request: Request, state: HttpState = Depends(http_state)) -> JSONResponse:
    path = request.url.path
    try:
        if state.events is None:
            raise PushRefused(404, off_message(source[:40]), None)
        receiver = state.events.receiver(source)
        body = await _body(request, receiver.max_body_bytes)
        answer = state.events.receive(source, body, dict(request.headers), request.query_params.get("token"))
    except PushRefused as refused:
        return error(refused.status, str(refused), refused.field, path)
    return JSONResponse(answer)
