"""The search service over HTTP (FastAPI): ``GET /health``, ``POST /v1/search`` (with ``"answer": true``, an
answer citing its sources), ``POST /v1/chat/completions`` and ``GET /v1/models`` (OpenAI-compatible answers),
``GET /v1/documents/{id}``, ``GET /metrics`` and the MCP tools at ``/mcp``. A thin layer: every search comes
from :class:`SearchService`, every answer from :mod:`rag_pipeline.answers.ask`.

Every error is a JSON object ``{"error": ..., "field": ...}`` with a 4xx status naming what was wrong, or a
503 saying why the index cannot answer now; an unexpected failure is a 500 with no detail (the traceback
goes to the server's log, without the query). Query text is never logged at INFO: uvicorn's access log
shows the method and path only, and the body is never logged.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from rag_pipeline.answers.agent import AgentTools, run_agent
from rag_pipeline.answers.ask import DEFAULT_LIMITS, Asked, ContextLimits, answer_results, ask, ask_streaming
from rag_pipeline.answers.generate import Answer, AnswerModel
from rag_pipeline.retrieval.results import SearchResponse, SearchResult
from rag_pipeline.retrieval.rewrite import PlanOutcome, QueryRewriter
from rag_pipeline.retrieval.tree import tree_json
from rag_pipeline.serving.access import AccessQueries, AccessRefused
from rag_pipeline.serving.identity import (
    EMAIL_HEADER,
    GROUPS_HEADER,
    USER_ID_HEADER,
    DirectoryLookup,
    IdentityError,
    Reader,
    resolve_reader,
)
from rag_pipeline.serving.ingest_api import ingest_router, is_ingest_path
from rag_pipeline.serving.ingest_api import refusal as ingest_refusal
from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.serving.mcp_tools import LocalTools, build_mcp_server
from rag_pipeline.serving.metrics import CONTENT_TYPE, ServiceMetrics
from rag_pipeline.serving.oidc import IssuerUnreachable, OidcVerifier, TokenRejected
from rag_pipeline.serving.rate_limit import PersonRateLimit
from rag_pipeline.serving.request_id import CURRENT as CURRENT_REQUEST_ID
from rag_pipeline.serving.request_id import HEADER as REQUEST_ID_HEADER
from rag_pipeline.serving.request_id import request_id_from
from rag_pipeline.serving.schemas import (
    MAX_QUERY_CHARS,
    ChatRequest,
    SearchRequest,
    ToolOutcomeRequest,
    ToolSearchRequest,
)
from rag_pipeline.serving.service import SearchService, ServedSearch
from rag_pipeline.serving.shared_index import IndexUnavailable
from rag_pipeline.serving.tokens import TokenRefused, TokenStore, looks_like_token
from rag_pipeline.serving.tracing import CURRENT_TRACE, trace_id_from
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


# A Host header is a name or address and an optional port, nothing else (RFC 9110 §7.2): no userinfo ("a@b"), path,
# spaces or second port, which a lenient split would read as another host ("127.0.0.1:80@evil.example").
_HOST_HEADER = re.compile(r"^(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::(?P<port>[0-9]{1,5}))?$")


def _host_of(header: str) -> str | None:
    """The host of a Host header (lower-cased, without the port), or None when the header is not host[:port]."""
    match = _HOST_HEADER.match(header.strip().lower())
    return match.group("host") if match else None


class AccessLogWithoutQuery(logging.Filter):
    """Uvicorn's access log with the path only: a query string can carry a token (``?token=…``) or a query, and
    neither may reach a log. Uvicorn's record args are (client, method, full path, HTTP version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


def uvicorn_log_config() -> dict[str, Any]:
    """Uvicorn's logging configuration with :class:`AccessLogWithoutQuery` on the access handler."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["path_only"] = {"()": AccessLogWithoutQuery}
    config["handlers"]["access"]["filters"] = ["path_only"]
    return config


class BodyTooLarge(StarletteHTTPException):
    """A request body over :data:`MAX_BODY_BYTES`, found while reading it (chunked bodies have no Content-Length).
    An HTTPException, so FastAPI's body parsing passes it on instead of turning it into a 400."""

    def __init__(self) -> None:
        super().__init__(413, f"the request body is over {MAX_BODY_BYTES} bytes")


def _body_limit_in(error: BaseException | None) -> bool:
    """Whether ``error`` is, or is a group holding, a :class:`BodyTooLarge`."""
    if error is None:
        return False
    if isinstance(error, BodyTooLarge):
        return True
    if isinstance(error, BaseExceptionGroup):
        return any(_body_limit_in(e) for e in error.exceptions)
    return _body_limit_in(error.__cause__)


class BodyLimit:
    """ASGI middleware counting the bytes of a /v1 request body as they arrive, and refusing past the limit: the
    Content-Length check alone let a 30 MB chunked body be read and parsed whole."""

    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        received = 0

        async def limited() -> dict[str, Any]:
            nonlocal received
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge()
            return message

        await self.app(scope, limited, send)


# The scope a personal token needs per route (/v1/documents/… and /mcp need "search"); /v1/models needs none.
ROUTE_SCOPES = {"/v1/search": "search", "/v1/chat/completions": "answer", "/v1/whois": "search", "/v1/tree": "search"}
TOKEN_SCOPES_KEY = "rag.token_scopes"
# Set by the service itself on a request whose verified caller is an admin (a copy a client sends is removed):
# the /v1 routes and the MCP tools read it with the identity headers.
ADMIN_HEADER = "X-Rag-Admin"

# A client refused for load waits this long (seconds) before it tries again.
ADMISSION_RETRY_AFTER_SECONDS = "1"

# What `model` may say in a chat request besides the configured model's own name.
SERVICE_MODEL_NAME = "rag-pipeline"


class RequestRefused(Exception):
    """A request this service will not answer: ``status`` with a message naming ``field``."""

    def __init__(self, status: int, field: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.field = field


def _llm_failure(exc: Exception) -> RequestRefused:
    """An answer model's failure as a 502/504 naming the model (the client's message, never a traceback)."""
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    if "Timeout" in kind:
        return RequestRefused(504, "model", f"the answer model did not answer in time ({kind})")
    detail = f"HTTP {status}" if status else kind
    return RequestRefused(502, "model", f"the answer model failed ({detail}); try again later")


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
            "question": asked.question,
            "context_documents": len(answer.context),
            "invalid_citations": list(answer.invalid_citations),
            "cost_usd": answer.usage.as_dict()["cost_usd"],
            "llm_calls": answer.usage.calls,
        },
    }


def _answer_text(answer: Answer) -> str:
    """The answer; when the model failed, a notice naming why and the documents found, so a chat client that shows
    only the message still gets them."""
    if not answer.failure:
        return answer.text
    found = "\n".join(f"[{s.number}] {s.title}" + (f" ({s.url})" if s.url else "") for s in answer.sources)
    return f"No answer: {answer.failure}. " + (
        f"The documents found for the question:\n{found}" if found else "No documents were found either."
    )


def _completion(completion_id: str, created: int, asked: Asked) -> dict[str, Any]:
    answer = asked.answer
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": answer.model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": _answer_text(answer)}, "finish_reason": "stop"}
        ],
        "usage": _usage(answer),
        **_rag_fields(asked),
    }


# The OpenAI-compatible routes answer errors in OpenAI's shape, which the official clients read.
OPENAI_ROUTES = ("/v1/chat/completions", "/v1/models")


def _replace_header(request: Request, removed: str, added: str, value: str | None) -> None:
    """Remove every ``removed`` header from the request's scope, then add ``added: value`` (unless None): what
    the routes and the MCP tools read downstream is what the service put there."""
    kept = [(k, v) for k, v in request.scope["headers"] if k.decode("latin-1").lower() != removed.lower()]
    request.scope["headers"] = kept + ([(added.lower().encode(), value.encode("utf-8"))] if value is not None else [])


def _error(status: int, message: str, field: str | None = None, path: str = "", **extra: Any) -> JSONResponse:
    """``{"error": message, "field": field}``; on the OpenAI-compatible routes (``path``) OpenAI's
    ``{"error": {"message", "type", "param", "code"}}`` with the same ``field`` beside it."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 and field == "Authorization" else None
    if path in OPENAI_ROUTES:
        kind = "invalid_request_error" if status < 500 else "server_error"
        code = {401: "invalid_api_key", 404: "not_found", 413: "request_too_large", 429: "rate_limit_exceeded"}
        error = {"message": message, "type": kind, "param": field, "code": code.get(status)}
        return JSONResponse({"error": error, "field": field, **extra}, status_code=status, headers=headers)
    return JSONResponse({"error": message, "field": field, **extra}, status_code=status, headers=headers)


def _validation_error(exc: RequestValidationError, path: str = "") -> JSONResponse:
    """Pydantic's errors as ``{"error", "field", "errors": [{"field", "message"}]}``; a body that is not JSON
    at all is a 400 on the field ``body``."""
    errors = []
    for item in exc.errors():
        loc = [str(part) for part in item.get("loc", ()) if part not in ("body",)]
        if item.get("type") == "json_invalid":
            return _error(400, "the request body is not valid JSON", "body", path)
        field = ".".join(loc) if loc else "body"
        message = str(item.get("msg", "invalid value")).removeprefix("Value error, ")
        errors.append({"field": field, "message": message})
    first = errors[0] if errors else {"field": "body", "message": "invalid request"}
    return _error(422, f"{first['field']}: {first['message']}", first["field"], path, errors=errors)


def _is_mcp(path: str) -> bool:
    """Whether ``path`` is the MCP endpoint (``/mcp`` or below it)."""
    return path == MCP_PATH or path.startswith(MCP_PATH + "/")


def _route_of(request: Request) -> str:
    """The route template a request is for (ids in paths would make one series per document), also for a
    request refused before routing (a missing token)."""
    if _is_mcp(request.url.path):
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
    answers: AnswerModel | None = None,
    answer_limits: ContextLimits = DEFAULT_LIMITS,
    rewriter: QueryRewriter | None = None,
    tokens: TokenStore | None = None,
    on_stop: Callable[[], None] | None = None,
    directory_file: Path | None = None,
    links_file: Path | None = None,
    ingest: IngestLauncher | None = None,
    agent_rounds: int | None = None,
) -> FastAPI:
    """The HTTP application over ``service``; ``settings`` say whether a token is required, whether
    ``X-User-Groups`` is believed and which Host names are answered (on loopback: loopback names only, which
    stops DNS-rebinding pages; ``listen_host`` is the address the service listens on); ``directory`` resolves
    callers to their accounts and groups; ``whois`` and ``explain`` read ``directory_file`` and ``links_file``."""
    tracing = service.tracing  # the service's: its searches' spans and the requests' spans go to one place
    hosts = allowed_hosts(listen_host, settings.allowed_hosts)
    search_threads = anyio.CapacityLimiter(SEARCH_THREADS)
    stats = service.index.stats
    metrics = ServiceMetrics(
        lambda: stats.opened_at,
        lambda: stats.hand_overs,
        lambda: stats.last_open_seconds,
        service.index_written,
        caches={
            "search": lambda: (service.search_cache.hits, service.search_cache.misses),
            "document": lambda: (service.document_cache.hits, service.document_cache.misses),
        },
    )
    token = settings.token.get_secret_value().encode() if settings.token is not None else None
    ingest_token = settings.ingest_token.get_secret_value().encode() if settings.ingest_token is not None else None
    verifier = (
        OidcVerifier(
            settings.oidc_issuer or "",
            settings.oidc_audience or "",
            settings.oidc_jwks_url,
            settings.oidc_claim,
            settings.oidc_algorithms,
        )
        if settings.auth == "oidc"
        else None
    )
    in_flight = 0  # admitted /v1 and /mcp requests not yet answered (one event loop: no lock needed)
    rate_limit = PersonRateLimit(settings.rate_per_minute) if settings.rate_per_minute else None

    def has_token(request: Request) -> bool:
        if token is None:
            return True
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        # Header values arrive decoded as Latin-1: encoding them back gives the bytes the client sent.
        return scheme.lower() == "bearer" and secrets.compare_digest(value.strip().encode("latin-1"), token)

    def reader_from(user_id: str | None, email: str | None, groups: str | None) -> Reader:
        return resolve_reader(user_id, email, groups, trusted_proxy=settings.trusted_proxy, directory=directory)

    def caller(
        x_user_id: str | None = Header(None),
        x_user_email: str | None = Header(None),
        x_user_groups: str | None = Header(None),
        x_rag_admin: str | None = Header(None),
    ) -> Reader:
        """The reader of a request, from its identity headers (a FastAPI dependency of every /v1 route)."""
        reader = reader_from(x_user_id, x_user_email, x_user_groups)
        return dataclasses.replace(reader, admin=True) if x_rag_admin == "1" else reader

    def mcp_reader(ctx: Context[Any, Any]) -> Reader:
        headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
        reader = reader_from(
            headers.get(USER_ID_HEADER.lower()), headers.get(EMAIL_HEADER.lower()), headers.get(GROUPS_HEADER.lower())
        )
        return dataclasses.replace(reader, admin=True) if headers.get(ADMIN_HEADER.lower()) == "1" else reader

    def mark_admin(request: Request) -> None:
        """After authentication: the admin header set on the request when its verified caller is an admin (an
        ``admin``-scoped personal token, or an identity in RAG_SERVE_ADMINS), and removed otherwise."""
        current = Headers(scope=request.scope)
        identity = (current.get(EMAIL_HEADER) or current.get(USER_ID_HEADER) or "").strip().lower()
        scopes = request.scope.get(TOKEN_SCOPES_KEY)
        admin = ("admin" in scopes) if scopes is not None else bool(identity) and identity in settings.admins
        _replace_header(request, ADMIN_HEADER, ADMIN_HEADER, "1" if admin else None)

    # whois/explain read the directory file itself (a person, not just a principal): where the service has none,
    # they answer that nobody is known.
    access = AccessQueries(directory_file, links_file, service.document_acl)
    mcp_server = build_mcp_server(LocalTools(service, access), mcp_reader)
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
            if on_stop is not None:
                # Here, not after uvicorn.run: uvicorn re-raises the SIGTERM it caught once the app has stopped,
                # which ends the process before any code after run().
                on_stop()
            await anyio.to_thread.run_sync(service.close)  # waits for queries in flight: not on the event loop
            await anyio.to_thread.run_sync(tracing.shutdown)  # the spans still buffered go out

    app = FastAPI(
        title="rag-pipeline search",
        description="Permission-aware search over the Slack and Jira index the pipeline writes.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )

    @app.middleware("http")
    async def authenticate_and_count(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
        token = CURRENT_REQUEST_ID.set(request_id)
        trace_token = CURRENT_TRACE.set(trace_id_from(request.headers) or "-")
        try:
            response = await _guarded(request, call_next)
        finally:
            CURRENT_REQUEST_ID.reset(token)
            CURRENT_TRACE.reset(trace_token)
        response.headers[REQUEST_ID_HEADER] = request_id
        metrics.requests.labels(route=_route_of(request), status=str(response.status_code)).inc()
        return response

    def as_identity(request: Request, identity: str) -> None:
        """Put ``identity`` in the request as its only identity header (the bearer removed): the dependency and
        the MCP tools resolve it through the directory like any caller's."""
        _replace_header(request, "Authorization", EMAIL_HEADER if "@" in identity else USER_ID_HEADER, identity)

    def refused_identity_header(request: Request, why: str) -> JSONResponse | None:
        for name in (USER_ID_HEADER, EMAIL_HEADER, GROUPS_HEADER):
            if name in request.headers:
                return _error(400, f"{name} is not accepted: the caller is who {why} says", name, request.url.path)
        return None

    async def personal_token(request: Request, value: str) -> JSONResponse | None:
        """A personal token (``rag-pipeline token create``): verified, its person made the identity, its scopes
        recorded and checked against the route; the refusal otherwise."""
        path = request.url.path
        if tokens is None:
            return _error(401, "personal tokens are not enabled on this service", "Authorization", path)
        if (refusal := refused_identity_header(request, "the personal token")) is not None:
            return refusal
        try:
            info = await anyio.to_thread.run_sync(tokens.verify, value)
        except TokenRefused as exc:
            return _error(401, str(exc), "Authorization", path)
        reads = path.startswith(("/v1/documents/", "/v1/explain/", "/v1/tools/")) or _is_mcp(path)
        needed = ROUTE_SCOPES.get(path) or ("search" if reads else None)
        if needed is not None and needed not in info.scopes:
            return _error(403, f"token {info.id} has no {needed!r} scope (it has: {', '.join(info.scopes)})",
                          "Authorization", path)  # fmt: skip
        request.scope[TOKEN_SCOPES_KEY] = info.scopes
        as_identity(request, info.person)
        return None

    async def verified_identity(request: Request, verifier: OidcVerifier, bearer: str) -> JSONResponse | None:
        """Under OIDC: the ``bearer`` JWT verified and its identity claim put in the request as the only identity
        header (a header the client sent is refused, so any identity header downstream is the token's); the
        refusal otherwise."""
        path = request.url.path
        if (refusal := refused_identity_header(request, "the OIDC token")) is not None:
            return refusal
        if not bearer:
            return _error(401, "an Authorization: Bearer token from the identity provider is required", "Authorization",
                          path)  # fmt: skip
        try:
            identity = await anyio.to_thread.run_sync(verifier.identity, bearer)
        except TokenRejected as exc:
            return _error(401, str(exc), "Authorization", path)
        except IssuerUnreachable as exc:
            log.warning("OIDC: %s", exc)
            return _error(503, "the identity provider's keys cannot be read now; try again later", None, path)
        as_identity(request, identity)
        return None

    async def _guarded(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        host = _host_of(request.headers.get("host", ""))
        if host is None:
            return _error(400, "the Host header is not a host name or address with an optional port", "Host", path)
        if hosts is not None and host not in hosts:
            return _error(400, "this Host is not served (RAG_SERVE_ALLOWED_HOSTS)", "Host", path)
        for name in IDENTITY_HEADERS:
            if len(request.headers.getlist(name)) > 1:
                # Which copy would a proxy have set? Neither is believed.
                return _error(400, f"{name} is given more than once", name, path)
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        bearer = value.strip() if scheme.lower() == "bearer" else ""
        if is_ingest_path(path):
            # The ingestion API's own token, and nothing else: no reader's identity is taken or needed there.
            refused = ingest_refusal(path, request.headers.get("authorization", ""), ingest_token)
            if refused is not None:
                return _error(refused[0], refused[1], "Authorization" if refused[0] == 401 else None, path)
        elif path not in UNAUTHENTICATED_PATHS and looks_like_token(bearer):
            refusal = await personal_token(request, bearer)
            if refusal is not None:
                return refusal
        elif path not in UNAUTHENTICATED_PATHS and verifier is not None:
            refusal = await verified_identity(request, verifier, bearer)
            if refusal is not None:
                return refusal
        elif path not in UNAUTHENTICATED_PATHS and not has_token(request):
            return _error(
                401, "a valid Authorization: Bearer token is required (RAG_SERVE_TOKEN)", "Authorization", path
            )
        mark_admin(request)
        length = request.headers.get("content-length", "")
        if path.startswith("/v1/") and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return _error(413, f"the request body is over {MAX_BODY_BYTES} bytes", "body", path)
        if _is_mcp(path):
            # The MCP tools read the same headers; refuse a call without a usable identity before the protocol.
            # The scope's headers, not request.headers (cached before an OIDC identity was put in).
            current = Headers(scope=request.scope)
            try:
                reader_from(
                    current.get(USER_ID_HEADER),
                    current.get(EMAIL_HEADER),
                    current.get(GROUPS_HEADER),
                )
            except IdentityError as exc:
                return _error(exc.status, str(exc), exc.field, path)
            if path == MCP_PATH:
                # Mounted apps answer at "/mcp/"; a client posting to "/mcp" is served the same, not redirected.
                request.scope["path"] = MCP_PATH + "/"
                request.scope["raw_path"] = (MCP_PATH + "/").encode()
        nonlocal in_flight
        # /health and /metrics always answer: a load balancer must see a busy service as alive.
        admitted = path.startswith("/v1/") or _is_mcp(path)
        if admitted and in_flight >= settings.max_in_flight:
            response = _error(429, f"the service is answering {in_flight} requests; try again shortly", None, path)
            response.headers["Retry-After"] = ADMISSION_RETRY_AFTER_SECONDS
            return response
        if admitted and rate_limit is not None:
            current = Headers(scope=request.scope)
            who = (current.get(EMAIL_HEADER) or current.get(USER_ID_HEADER) or "anonymous").strip().lower()
            wait = rate_limit.allow(who)
            if wait:
                response = _error(429, f"over {rate_limit.per_minute} requests a minute for this caller "
                                  "(RAG_SERVE_RATE_PER_MINUTE)", None, path)  # fmt: skip
                response.headers["Retry-After"] = str(wait)
                return response
        in_flight += admitted
        try:
            return await call_next(request)
        except BodyTooLarge as exc:
            return _error(exc.status_code, str(exc.detail), "body", path)
        except Exception:
            log.exception("unexpected error answering %s %s", request.method, _route_of(request))
            return _error(500, "internal error (the service logged the details)", None, path)
        finally:
            in_flight -= admitted

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc, request.url.path)

    @app.exception_handler(IdentityError)
    async def bad_identity(request: Request, exc: IdentityError) -> JSONResponse:
        return _error(exc.status, str(exc), exc.field, request.url.path)

    @app.exception_handler(RequestRefused)
    async def refused(request: Request, exc: RequestRefused) -> JSONResponse:
        return _error(exc.status, str(exc), exc.field, request.url.path)

    @app.exception_handler(IndexUnavailable)
    async def index_unavailable(request: Request, exc: IndexUnavailable) -> JSONResponse:
        return _error(503, f"the index is not available now: {exc}", None, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if _body_limit_in(exc.__cause__):
            # BodyLimit's refusal, raised inside the middleware's task group and re-wrapped by FastAPI as "error
            # parsing the body": it is a 413.
            return _error(413, str(BodyTooLarge().detail), "body", request.url.path)
        # FastAPI's "error parsing the body" (invalid UTF-8, an integer of thousands of digits) is the body's fault.
        field = "body" if exc.status_code in (400, 413) and request.method == "POST" else None
        response = _error(exc.status_code, str(exc.detail), field, request.url.path)
        response.headers.update(exc.headers or {})  # a 405's Allow
        return response

    @app.api_route("/health", methods=["GET", "HEAD"])
    def health(request: Request) -> JSONResponse:
        ready, body = service.health()
        if verifier is not None or (token is not None and not has_token(request)):
            # Unauthenticated load balancers get the verdict only: no paths, counts or model names.
            body = {"status": body["status"]}
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.post("/v1/search")
    async def search(
        request: SearchRequest,
        http_request: Request,
        reader: Reader = Depends(caller),
    ) -> dict[str, Any]:
        scopes = http_request.scope.get(TOKEN_SCOPES_KEY)
        if request.answer and scopes is not None and "answer" not in scopes:
            raise RequestRefused(
                403, "answer", f"this personal token has no 'answer' scope (it has: {', '.join(scopes)})"
            )
        plan = None
        if request.rewrite:
            if rewriter is None:
                raise RequestRefused(503, "rewrite", "rewriting is off: set RAG_REWRITE_MODEL on the service")
            with tracing.stage("rewrite"):
                plan = await anyio.to_thread.run_sync(rewriter.plan, request.query)
            observe_rewrite(plan)
        served = await anyio.to_thread.run_sync(service.search, request, reader.principal, plan, limiter=search_threads)
        response = observed(served)
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
            model = answer_model(None)
            started = time.perf_counter()
            # A model that fails leaves the answer null with the reason beside the sources (HTTP 200).
            with tracing.stage("generate", model=model.model):
                answer = await anyio.to_thread.run_sync(
                    lambda: answer_results(model, request.query, response.results, answer_limits)
                )
            observe_answer("/v1/search", answer, time.perf_counter() - started)
            body.update(answer_fields(answer))
        return body

    def answer_model(name: str | None) -> AnswerModel:
        if answers is None:
            raise RequestRefused(
                503, "model", "answers are off: set RAG_ANSWER_MODEL (and OPENAI_API_KEY) on the service"
            )
        if name in (None, "", SERVICE_MODEL_NAME, answers.model):
            return answers
        raise RequestRefused(
            400, "model", f"model {name!r} is not served; use {answers.model!r} or {SERVICE_MODEL_NAME!r}"
        )

    def observe_answer(route: str, answer: Answer, seconds: float) -> None:
        usage = answer.usage
        outcome = "failed" if answer.failure else "answered" if answer.context else "no_documents"
        if answer.failure:
            log.warning("answered without the model on %s: %s", route, answer.failure)
        metrics.observe_answer(route, outcome, usage.prompt_tokens, usage.completion_tokens, usage.cost_usd,
                               len(answer.invalid_citations), seconds)  # fmt: skip
        if answer.invalid_citations:
            log.info("answer cited %d number(s) not in its context; dropped", len(answer.invalid_citations))

    def answer_fields(answer: Answer) -> dict[str, Any]:
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

    def observed(served: ServedSearch) -> SearchResponse:
        """A search's stage timings and result count into the metrics (every route that searches); its response."""
        response = served.response
        metrics.observe_search(
            response.mode,
            {k: v / 1000 for k, v in served.timing_ms.items() if k != "wait"},
            served.waited_seconds,
            len(response.results),
            requested=response.requested_mode,
        )
        return response

    def observe_rewrite(plan: PlanOutcome) -> None:
        outcome = "fallback" if plan.plan is None else "cached" if plan.cached else "planned"
        metrics.observe_rewrite(outcome, plan.seconds)

    def chat_search(reader: Reader) -> Callable[[str], list[SearchResult]]:
        def search(question: str) -> list[SearchResult]:
            request = SearchRequest(query=question[:MAX_QUERY_CHARS], mode="reranked", top_k=answer_limits.documents)
            plan = None
            if rewriter is not None:
                with tracing.stage("rewrite"):
                    plan = rewriter.plan(request.query)
                observe_rewrite(plan)
            return observed(service.search(request, reader.principal, plan)).results

        return search

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        served = [answers.model] if answers is not None else []
        return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "rag-pipeline"}
                                           for m in served]}  # fmt: skip

    def agent_tools(reader: Reader) -> AgentTools:
        """The caller's own tools: the model's arguments choose a query, a source, a document, never a reader."""

        def search(query: str, source: str | None, top_k: int) -> list[SearchResult]:
            request = SearchRequest(query=query[:MAX_QUERY_CHARS], top_k=top_k, source=[source] if source else None)
            return observed(service.search(request, reader.principal)).results

        def document(document_id: str) -> dict[str, Any] | None:
            found = service.get_document(document_id[:1000], reader.principal)
            return None if found is None else found.to_dict()

        return AgentTools(search, document, lambda prefix: tree_json(service.tree(reader.principal, prefix)))

    async def agent_completion(
        request: ChatRequest, reader: Reader, model: AnswerModel, completion_id: str, created: int
    ) -> Response:
        """The answer of a model that calls the tools itself (RAG_AGENT); streamed as one piece when asked to."""
        tools = agent_tools(reader)
        agent = await anyio.to_thread.run_sync(
            lambda: run_agent(model, tools, request.turns(), agent_rounds or 1, answer_limits.max_chars),
            limiter=search_threads,
        )
        observe_answer("/v1/chat/completions", agent.answer, agent.seconds)
        asked = Asked(agent.question, agent.results, agent.answer, agent.seconds)
        extra = {"tool_calls": [c.as_dict() for c in agent.tool_calls]}
        if not request.stream:
            body = _completion(completion_id, created, asked)
            body["rag"].update(extra)
            return JSONResponse(body)
        base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model.model}

        def events() -> Iterator[str]:
            yield _event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                              "finish_reason": None}]})  # fmt: skip
            yield _event({**base, "choices": [{"index": 0, "delta": {"content": _answer_text(agent.answer)},
                                              "finish_reason": None}]})  # fmt: skip
            final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], **_rag_fields(asked)}
            final["rag"].update(extra)
            yield _event(final)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(
        request: ChatRequest,
        reader: Reader = Depends(caller),
    ) -> Response:
        model = answer_model(request.model)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if agent_rounds:
            return await agent_completion(request, reader, model, completion_id, created)
        search = chat_search(reader)
        started = time.perf_counter()
        if not request.stream:
            try:
                asked = await anyio.to_thread.run_sync(
                    lambda: ask(model, search, request.turns(), answer_limits), limiter=search_threads
                )
            except (IndexUnavailable, RequestRefused, IdentityError):
                raise
            except Exception as exc:
                metrics.observe_answer("/v1/chat/completions", "failed", 0, 0, None, 0, time.perf_counter() - started)
                raise _llm_failure(exc) from None
            observe_answer("/v1/chat/completions", asked.answer, asked.answer_seconds)
            tracing.ended_stage("generate", asked.answer_seconds, model=model.model)
            return JSONResponse(_completion(completion_id, created, asked))
        pieces = ask_streaming(model, search, request.turns(), answer_limits)
        try:
            # The question is condensed, searched and the first words written before the response starts, so a
            # failure there is still a proper error status rather than a broken stream.
            first = await anyio.to_thread.run_sync(lambda: next(pieces), limiter=search_threads)
        except (IndexUnavailable, RequestRefused, IdentityError):
            raise
        except Exception as exc:
            metrics.observe_answer("/v1/chat/completions", "failed", 0, 0, None, 0, time.perf_counter() - started)
            raise _llm_failure(exc) from None
        include_usage = bool(request.stream_options and request.stream_options.include_usage)

        def events() -> Iterator[str]:
            base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model.model}
            yield _event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                              "finish_reason": None}]})  # fmt: skip
            try:
                for piece in _chain(first, pieces):
                    if isinstance(piece, Asked):
                        observe_answer("/v1/chat/completions", piece.answer, piece.answer_seconds)
                        tracing.ended_stage("generate", piece.answer_seconds, model=model.model)
                        if piece.answer.failure:  # the notice, after any words the model wrote before it failed
                            notice = ("\n\n" if piece.answer.text else "") + _answer_text(piece.answer)
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
                refused = _llm_failure(exc)
                metrics.observe_answer("/v1/chat/completions", "failed", 0, 0, None, 0, time.perf_counter() - started)
                yield _event({"error": {"message": str(refused), "type": "server_error", "param": refused.field}})
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.get("/v1/documents/{document_id:path}")
    async def document(
        document_id: str,
        reader: Reader = Depends(caller),
    ) -> JSONResponse:
        if len(document_id) > 1000:
            return _error(422, "document_id: at most 1000 characters", "document_id")
        found = await anyio.to_thread.run_sync(
            service.get_document, document_id, reader.principal, limiter=search_threads
        )
        if found is None:
            # Missing and forbidden read the same, so a caller cannot probe for documents it may not see.
            return _error(404, f"document {document_id!r} not found", "document_id")
        return JSONResponse(found.to_dict())

    @app.get("/v1/tree")
    async def tree(
        prefix: str | None = Query(None, min_length=1, max_length=200),
        reader: Reader = Depends(caller),
    ) -> JSONResponse:
        nodes = await anyio.to_thread.run_sync(service.tree, reader.principal, prefix, limiter=search_threads)
        return JSONResponse({"reader": reader.describe(), "prefix": prefix, "sources": tree_json(nodes)})

    @app.post("/v1/tools/search")
    async def search_tools(request: ToolSearchRequest, reader: Reader = Depends(caller)) -> JSONResponse:
        """The few tools a task needs, with the prompt tokens they cost against loading every tool."""
        found = await anyio.to_thread.run_sync(service.search_tools, request, reader.principal, limiter=search_threads)
        return JSONResponse(found.to_dict())

    @app.post("/v1/tools/{name}/outcome")
    async def tool_outcome(
        request: ToolOutcomeRequest,
        name: str = PathParam(min_length=1, max_length=200),
        reader: Reader = Depends(caller),
    ) -> JSONResponse:
        """Record whether calling a tool worked: tool search ranks tools that get used and work higher."""
        try:
            recorded = await anyio.to_thread.run_sync(
                service.record_tool_outcome, name, request, limiter=search_threads
            )
        except KeyError:
            return _error(404, f"no indexed tool is named {name!r}", "name", f"/v1/tools/{name}/outcome")
        return JSONResponse(recorded)

    @app.get("/v1/whois")
    async def whois(
        person: str | None = Query(None, min_length=1, max_length=320),
        reader: Reader = Depends(caller),
    ) -> JSONResponse:
        """The caller's accounts, groups (with the grant behind each) and private channels; another person's
        with ``?person=`` for admins."""
        try:
            return JSONResponse(await anyio.to_thread.run_sync(access.whois, reader, person))
        except AccessRefused as exc:
            return _error(exc.status, str(exc), exc.field)

    @app.get("/v1/explain/{document_id:path}")
    async def explain_access(
        document_id: str,
        person: str | None = Query(None, min_length=1, max_length=320),
        reader: Reader = Depends(caller),
    ) -> JSONResponse:
        """Why the caller may read a document (404 for one they may not, as /v1/documents); for admins, about
        ``?person=``, hidden documents included, with the restriction that hides them."""
        if len(document_id) > 1000:
            return _error(422, "document_id: at most 1000 characters", "document_id")
        try:
            answer = await anyio.to_thread.run_sync(access.explain, document_id, reader, person, limiter=search_threads)
        except AccessRefused as exc:
            return _error(exc.status, str(exc), exc.field)
        return JSONResponse(answer)

    @app.get("/metrics")
    def prometheus_metrics() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    if ingest is not None and ingest_token is not None:
        app.include_router(ingest_router(ingest))
    app.mount(MCP_PATH, mcp_app)
    app.add_middleware(BodyLimit)
    tracing.instrument(app)  # outermost: the request's span covers the limits and the authentication too
    return app
