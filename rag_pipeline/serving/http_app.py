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

import anyio
import anyio.to_thread
from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from rag_pipeline.serving.identity import (
    EMAIL_HEADER,
    GROUPS_HEADER,
    USER_ID_HEADER,
    DirectoryLookup,
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
# Requests are small JSON objects: a query is at most 8,000 characters.
MAX_BODY_BYTES = 64 * 1024
IDENTITY_HEADERS = (USER_ID_HEADER, EMAIL_HEADER, GROUPS_HEADER, "Authorization")
# Names a browser on this machine may use for a service on loopback. Any other Host is a DNS-rebinding page
# (a site whose name now resolves to 127.0.0.1) and is refused.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
# Searches run in worker threads of their own, so queries waiting for the index (up to RAG_STORE_WAIT_SECONDS)
# never take the threads /health and /metrics answer from.
SEARCH_THREADS = 32


def allowed_hosts(listen_host: str, configured: tuple[str, ...]) -> tuple[str, ...] | None:
    """The Host header values the service answers (without port); None: any (a token guards it)."""
    if configured:
        return tuple(h.lower() for h in configured)
    loopback = listen_host in LOOPBACK_HOSTS or listen_host.startswith("127.")
    return (*LOOPBACK_HOSTS, listen_host) if loopback else None


def _host_of(header: str) -> str:
    host = header.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


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
    if request.url.path == MCP_PATH or request.url.path.startswith(MCP_PATH + "/"):
        return MCP_PATH
    route = request.scope.get("route")
    if route is not None:
        return str(getattr(route, "path", "unmatched"))
    for candidate in request.app.router.routes:
        match, _ = candidate.matches(request.scope)
        if match != Match.NONE:
            return str(getattr(candidate, "path", "unmatched"))
    return "unmatched"


def create_app(
    service: SearchService,
    settings: ServeSettings,
    *,
    listen_host: str = "127.0.0.1",
    directory: DirectoryLookup | None = None,
) -> FastAPI:
    """The HTTP application over ``service``; ``settings`` say whether a token is required, whether
    ``X-User-Groups`` is believed and which Host names are answered (on loopback: loopback names only, which
    stops DNS-rebinding pages; ``listen_host`` is the address the service listens on); ``directory`` resolves
    callers to their accounts and groups."""
    hosts = allowed_hosts(listen_host, settings.allowed_hosts)
    search_threads = anyio.CapacityLimiter(SEARCH_THREADS)
    stats = service.index.stats
    metrics = ServiceMetrics(lambda: stats.opened_at, lambda: stats.hand_overs, lambda: stats.last_open_seconds)
    token = settings.token.get_secret_value().encode() if settings.token is not None else None

    def has_token(request: Request) -> bool:
        if token is None:
            return True
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        # Header values arrive decoded as Latin-1: encoding them back gives the bytes the client sent.
        return scheme.lower() == "bearer" and secrets.compare_digest(value.strip().encode("latin-1"), token)

    def reader_from(user_id: str | None, email: str | None, groups: str | None) -> Reader:
        return resolve_reader(user_id, email, groups, trusted_proxy=settings.trusted_proxy, directory=directory)

    def mcp_reader(ctx: Context[Any, Any]) -> Reader:
        headers = ctx.headers or {}
        return reader_from(headers.get(USER_ID_HEADER), headers.get(EMAIL_HEADER), headers.get(GROUPS_HEADER))

    mcp_server = build_mcp_server(service, mcp_reader)
    # The Host check below covers /mcp too (the SDK's own check would refuse the names of a proxy in front).
    mcp_app = mcp_server.streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        service.start()
        try:
            async with mcp_server.session_manager.run():
                yield
        finally:
            await anyio.to_thread.run_sync(service.close)  # waits for queries in flight: not on the event loop

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
        if hosts is not None and _host_of(request.headers.get("host", "")) not in hosts:
            return _error(400, "this Host is not served (RAG_SERVE_ALLOWED_HOSTS)", "Host")
        for name in IDENTITY_HEADERS:
            if len(request.headers.getlist(name)) > 1:
                # Which copy would a proxy have set? Neither is believed.
                return _error(400, f"{name} is given more than once", name)
        if path not in UNAUTHENTICATED_PATHS and not has_token(request):
            return _error(401, "a valid Authorization: Bearer token is required (RAG_SERVE_TOKEN)", "Authorization")
        length = request.headers.get("content-length", "")
        if path.startswith("/v1/") and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return _error(413, f"the request body is over {MAX_BODY_BYTES} bytes", "body")
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
        response = _error(exc.status_code, str(exc.detail), None)
        response.headers.update(exc.headers or {})  # a 405's Allow
        return response

    @app.api_route("/health", methods=["GET", "HEAD"])
    def health(request: Request) -> JSONResponse:
        ready, body = service.health()
        if token is not None and not has_token(request):
            # Unauthenticated load balancers get the verdict only: no paths, counts or model names.
            body = {"status": body["status"]}
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.post("/v1/search")
    async def search(
        request: SearchRequest,
        x_user_id: str | None = Header(None),
        x_user_email: str | None = Header(None),
        x_user_groups: str | None = Header(None),
    ) -> dict[str, Any]:
        reader = reader_from(x_user_id, x_user_email, x_user_groups)
        served = await anyio.to_thread.run_sync(service.search, request, reader.principal, limiter=search_threads)
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
    async def document(
        document_id: str,
        x_user_id: str | None = Header(None),
        x_user_email: str | None = Header(None),
        x_user_groups: str | None = Header(None),
    ) -> JSONResponse:
        reader = reader_from(x_user_id, x_user_email, x_user_groups)
        if len(document_id) > 1000:
            return _error(422, "document_id: at most 1000 characters", "document_id")
        found = await anyio.to_thread.run_sync(
            service.get_document, document_id, reader.principal, limiter=search_threads
        )
        if found is None:
            # Missing and forbidden read the same, so a caller cannot probe for documents it may not see.
            return _error(404, f"document {document_id!r} not found", "document_id")
        return JSONResponse(found.to_dict())

    @app.get("/metrics")
    def prometheus_metrics() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    app.mount(MCP_PATH, mcp_app)
    return app
