"""The search service over HTTP (FastAPI): ``GET /health``, ``POST /v1/search``, ``GET /v1/documents/{id}``,
``GET /metrics`` and the MCP tools at ``/mcp``. A thin layer: every answer comes from :class:`SearchService`.

Every error is a JSON object ``{"error": ..., "field": ...}`` with a 4xx status naming what was wrong, or a
503 saying why the index cannot answer now; an unexpected failure is a 500 with no detail (the traceback
goes to the server's log, without the query). Query text is never logged at INFO: uvicorn's access log
shows the method and path only, and the body is never logged.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from mcp.server.mcpserver import Context
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from rag_pipeline.serving.identity import (
    EMAIL_HEADER,
    GROUPS_HEADER,
    USER_ID_HEADER,
    IdentityError,
    Reader,
    resolve_reader,
)
from rag_pipeline.serving.mcp_tools import build_mcp_server
from rag_pipeline.serving.metrics import CONTENT_TYPE, ServiceMetrics
from rag_pipeline.serving.schemas import SearchRequest
from rag_pipeline.serving.service import SearchService
from rag_pipeline.serving.shared_index import IndexUnavailable
from rag_pipeline.settings import ServeSettings

log = logging.getLogger(__name__)

UNAUTHENTICATED_PATHS = frozenset({"/health"})
MCP_PATH = "/mcp"


def _error(status: int, message: str, field: str | None = None, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 and field == "Authorization" else None
    return JSONResponse({"error": message, "field": field, **extra}, status_code=status, headers=headers)


def _validation_error(exc: RequestValidationError) -> JSONResponse:
    """Pydantic's errors as ``{"error", "field", "errors": [{"field", "message"}]}``; a body that is not JSON
    at all is a 400 on the field ``body``."""
    errors = []
    for item in exc.errors():
        loc = [str(part) for part in item.get("loc", ()) if part not in ("body",)]
        if item.get("type") == "json_invalid":
            return _error(400, "the request body is not valid JSON", "body")
        field = ".".join(loc) if loc else "body"
        message = str(item.get("msg", "invalid value")).removeprefix("Value error, ")
        errors.append({"field": field, "message": message})
    first = errors[0] if errors else {"field": "body", "message": "invalid request"}
    return _error(422, f"{first['field']}: {first['message']}", first["field"], errors=errors)


def _route_of(request: Request) -> str:
    """The route template a request is for (ids in paths would make one series per document), also for a
    request refused before routing (a missing token)."""
    if request.url.path.startswith(MCP_PATH):
        return MCP_PATH
    route = request.scope.get("route")
    if route is not None:
        return str(getattr(route, "path", "unmatched"))
    for candidate in request.app.router.routes:
        match, _ = candidate.matches(request.scope)
        if match != Match.NONE:
            return str(getattr(candidate, "path", "unmatched"))
    return "unmatched"


def create_app(service: SearchService, settings: ServeSettings, *, mcp_host: str = "127.0.0.1") -> FastAPI:
    """The HTTP application over ``service``; ``settings`` say whether a token is required and whether
    ``X-User-Groups`` is believed. ``mcp_host`` is the host the service listens on (the MCP transport's
    DNS-rebinding protection allows only that host's names)."""
    stats = service.index.stats
    metrics = ServiceMetrics(lambda: stats.opened_at, lambda: stats.hand_overs, lambda: stats.last_open_seconds)
    token = settings.token.get_secret_value().encode() if settings.token is not None else None

    def reader_from(user_id: str | None, email: str | None, groups: str | None) -> Reader:
        return resolve_reader(user_id, email, groups, trusted_proxy=settings.trusted_proxy)

    def mcp_reader(ctx: Context[Any, Any]) -> Reader:
        headers = ctx.headers or {}
        return reader_from(headers.get(USER_ID_HEADER), headers.get(EMAIL_HEADER), headers.get(GROUPS_HEADER))

    mcp_server = build_mcp_server(service, mcp_reader)
    mcp_app = mcp_server.streamable_http_app(
        streamable_http_path="/", stateless_http=True, json_response=True, host=mcp_host
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        service.start()
        try:
            async with mcp_server.session_manager.run():
                yield
        finally:
            service.close()

    app = FastAPI(
        title="rag-pipeline search",
        description="Permission-aware search over the Slack and Jira index the pipeline writes.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )

    @app.middleware("http")
    async def authenticate_and_count(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await _guarded(request, call_next)
        metrics.requests.labels(route=_route_of(request), status=str(response.status_code)).inc()
        return response

    async def _guarded(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        if token is not None and path not in UNAUTHENTICATED_PATHS:
            given = request.headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not secrets.compare_digest(value.strip().encode(), token):
                return _error(401, "a valid Authorization: Bearer token is required (RAG_SERVE_TOKEN)", "Authorization")
        if path == MCP_PATH or path.startswith(MCP_PATH + "/"):
            # The MCP tools read the same headers; refuse a call without a usable identity before the protocol.
            try:
                reader_from(
                    request.headers.get(USER_ID_HEADER),
                    request.headers.get(EMAIL_HEADER),
                    request.headers.get(GROUPS_HEADER),
                )
            except IdentityError as exc:
                return _error(exc.status, str(exc), exc.field)
            if path == MCP_PATH:
                # Mounted apps answer at "/mcp/"; a client posting to "/mcp" is served the same, not redirected.
                request.scope["path"] = MCP_PATH + "/"
                request.scope["raw_path"] = (MCP_PATH + "/").encode()
        try:
            return await call_next(request)
        except Exception:
            log.exception("unexpected error answering %s %s", request.method, _route_of(request))
            return _error(500, "internal error (the service logged the details)")

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc)

    @app.exception_handler(IdentityError)
    async def bad_identity(_request: Request, exc: IdentityError) -> JSONResponse:
        return _error(exc.status, str(exc), exc.field)

    @app.exception_handler(IndexUnavailable)
    async def index_unavailable(_request: Request, exc: IndexUnavailable) -> JSONResponse:
        return _error(503, f"the index is not available now: {exc}", None)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), None)

    @app.get("/health")
    def health() -> JSONResponse:
        ready, body = service.health()
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.post("/v1/search")
    def search(
        request: SearchRequest,
        x_user_id: str | None = Header(None),
        x_user_email: str | None = Header(None),
        x_user_groups: str | None = Header(None),
    ) -> dict[str, Any]:
        reader = reader_from(x_user_id, x_user_email, x_user_groups)
        served = service.search(request, reader.principal)
        response = served.response
        metrics.observe_search(
            response.mode,
            {k: v / 1000 for k, v in served.timing_ms.items() if k != "wait"},
            served.waited_seconds,
            len(response.results),
        )
        return {
            "query": request.query,
            "mode": response.mode,
            "requested_mode": response.requested_mode,
            "reranker": served.reranker,
            "warnings": response.warnings,
            "reader": reader.describe(),
            "results": [r.to_dict() for r in response.results],
            "timing_ms": served.timing_ms,
        }

    @app.get("/v1/documents/{document_id:path}")
    def document(
        document_id: str,
        x_user_id: str | None = Header(None),
        x_user_email: str | None = Header(None),
        x_user_groups: str | None = Header(None),
    ) -> JSONResponse:
        reader = reader_from(x_user_id, x_user_email, x_user_groups)
        if len(document_id) > 1000:
            return _error(422, "document_id: at most 1000 characters", "document_id")
        found = service.get_document(document_id, reader.principal)
        if found is None:
            # Missing and forbidden read the same, so a caller cannot probe for documents it may not see.
            return _error(404, f"document {document_id!r} not found", "document_id")
        return JSONResponse(found.to_dict())

    @app.get("/metrics")
    def prometheus_metrics() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    app.mount(MCP_PATH, mcp_app)
    return app
