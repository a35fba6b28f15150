"""The middleware every request passes before a route: request id and trace, the Host check, one copy of each
identity header, the caller's authentication (service token, personal token, OIDC token, or the ingestion API's own
token), the admin mark, the body size, the MCP identity check, admission (requests in flight, per-caller rate) and
the last-resort 500 that logs without the query."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator

import anyio.to_thread
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Match

from rag_pipeline.http.errors import error
from rag_pipeline.http.limits import MAX_BODY_BYTES, OWN_BODY_LIMIT, BodyTooLarge, host_of
from rag_pipeline.http.oidc import IssuerUnreachable, OidcVerifier, TokenRejected
from rag_pipeline.http.rate_limit import PersonRateLimit
from rag_pipeline.http.request_id import CURRENT as CURRENT_REQUEST_ID
from rag_pipeline.http.request_id import HEADER as REQUEST_ID_HEADER
from rag_pipeline.http.request_id import request_id_from
from rag_pipeline.http.routes.events import is_event_path
from rag_pipeline.http.routes.ingest import is_ingest_path
from rag_pipeline.http.routes.ingest import refusal as ingest_refusal
from rag_pipeline.http.state import ADMIN_HEADER, TOKEN_SCOPES_KEY, HttpState
from rag_pipeline.serving.identity import EMAIL_HEADER, GROUPS_HEADER, USER_ID_HEADER, IdentityError
from rag_pipeline.serving.tokens import TokenRefused, TokenStore, looks_like_token
from rag_pipeline.serving.tracing import CURRENT_TRACE, trace_id_from

log = logging.getLogger(__name__)

UNAUTHENTICATED_PATHS = frozenset({"/health"})
MCP_PATH = "/mcp"
IDENTITY_HEADERS = (USER_ID_HEADER, EMAIL_HEADER, GROUPS_HEADER, "Authorization")
# The scope a personal token needs per route (/v1/documents/… and /mcp need "search"); /v1/models needs none.
ROUTE_SCOPES = {"/v1/search": "search", "/v1/chat/completions": "answer", "/v1/whois": "search", "/v1/tree": "search"}
# A client refused for load waits this long (seconds) before it tries again.
ADMISSION_RETRY_AFTER_SECONDS = "1"

Next = Callable[[Request], Awaitable[Response]]


def is_mcp(path: str) -> bool:
    """Whether ``path`` is the MCP endpoint (``/mcp`` or below it)."""
    return path == MCP_PATH or path.startswith(MCP_PATH + "/")


def flat_routes(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """The routes an app serves, those of included routers too (FastAPI keeps an included router as one entry
    holding its ``original_router``)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from flat_routes(included.routes)
        else:
            yield route


def route_of(request: Request) -> str:
    """The route template a request is for (ids in paths would make one series per document), also for a
    request refused before routing (a missing token)."""
    if is_mcp(request.url.path):
        return MCP_PATH
    route = request.scope.get("route")
    if route is not None:
        return str(getattr(route, "path", "unmatched"))
    for candidate in flat_routes(request.app.router.routes):
        match, _ = candidate.matches(request.scope)
        if match != Match.NONE:
            return str(getattr(candidate, "path", "unmatched"))
    return "unmatched"


def replace_header(request: Request, removed: str, added: str, value: str | None) -> None:
    """Remove every ``removed`` header from the request's scope, then add ``added: value`` (unless None): what
    the routes and the MCP tools read downstream is what the service put there."""
    kept = [(k, v) for k, v in request.scope["headers"] if k.decode("latin-1").lower() != removed.lower()]
    request.scope["headers"] = kept + ([(added.lower().encode(), value.encode("utf-8"))] if value is not None else [])


class Guard:
    """The ``http`` middleware of one app (it counts the requests it admitted, on one event loop: no lock)."""

    def __init__(
        self,
        state: HttpState,
        hosts: tuple[str, ...] | None,
        tokens: TokenStore | None = None,
        ingest_token: bytes | None = None,
    ) -> None:
        self.state = state
        self.hosts = hosts
        self.tokens = tokens
        self.ingest_token = ingest_token
        settings = state.settings
        self.rate_limit = PersonRateLimit(settings.rate_per_minute) if settings.rate_per_minute else None
        self.in_flight = 0  # admitted /v1 and /mcp requests not yet answered

    async def __call__(self, request: Request, call_next: Next) -> Response:
        request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
        token = CURRENT_REQUEST_ID.set(request_id)
        trace_token = CURRENT_TRACE.set(trace_id_from(request.headers) or "-")
        try:
            response = await self._guarded(request, call_next)
        finally:
            CURRENT_REQUEST_ID.reset(token)
            CURRENT_TRACE.reset(trace_token)
        response.headers[REQUEST_ID_HEADER] = request_id
        self.state.metrics.requests.labels(route=route_of(request), status=str(response.status_code)).inc()
        return response

    # --- who is calling ----------------------------------------------------------------------------------------
    def _mark_admin(self, request: Request) -> None:
        """After authentication: the admin header set on the request when its verified caller is an admin (an
        ``admin``-scoped personal token, or an identity in RAG_SERVE_ADMINS), and removed otherwise."""
        current = Headers(scope=request.scope)
        identity = (current.get(EMAIL_HEADER) or current.get(USER_ID_HEADER) or "").strip().lower()
        scopes = request.scope.get(TOKEN_SCOPES_KEY)
        admins = self.state.settings.admins
        admin = ("admin" in scopes) if scopes is not None else bool(identity) and identity in admins
        replace_header(request, ADMIN_HEADER, ADMIN_HEADER, "1" if admin else None)

    @staticmethod
    def _as_identity(request: Request, identity: str) -> None:
        """Put ``identity`` in the request as its only identity header (the bearer removed): the dependency and
        the MCP tools resolve it through the directory like any caller's."""
        replace_header(request, "Authorization", EMAIL_HEADER if "@" in identity else USER_ID_HEADER, identity)

    @staticmethod
    def _refused_identity_header(request: Request, why: str) -> JSONResponse | None:
        for name in (USER_ID_HEADER, EMAIL_HEADER, GROUPS_HEADER):
            if name in request.headers:
                return error(400, f"{name} is not accepted: the caller is who {why} says", name, request.url.path)
        return None

    async def _personal_token(self, request: Request, value: str) -> JSONResponse | None:
        """A personal token (``rag-pipeline token create``): verified, its person made the identity, its scopes
        recorded and checked against the route; the refusal otherwise."""
        path = request.url.path
        if self.tokens is None:
            return error(401, "personal tokens are not enabled on this service", "Authorization", path)
        if (refusal := self._refused_identity_header(request, "the personal token")) is not None:
            return refusal
        try:
            info = await anyio.to_thread.run_sync(self.tokens.verify, value)
        except TokenRefused as exc:
            return error(401, str(exc), "Authorization", path)
        reads = path.startswith(("/v1/documents/", "/v1/explain/", "/v1/tools/")) or is_mcp(path)
        needed = ROUTE_SCOPES.get(path) or ("search" if reads else None)
        if needed is not None and needed not in info.scopes:
            return error(403, f"token {info.id} has no {needed!r} scope (it has: {', '.join(info.scopes)})",
                         "Authorization", path)  # fmt: skip
        request.scope[TOKEN_SCOPES_KEY] = info.scopes
        self._as_identity(request, info.person)
        return None

    async def _verified_identity(self, request: Request, verifier: OidcVerifier, bearer: str) -> JSONResponse | None:
        """Under OIDC: the ``bearer`` JWT verified and its identity claim put in the request as the only identity
        header (a header the client sent is refused, so any identity header downstream is the token's); the
        refusal otherwise."""
        path = request.url.path
        if (refusal := self._refused_identity_header(request, "the OIDC token")) is not None:
            return refusal
        if not bearer:
            return error(401, "an Authorization: Bearer token from the identity provider is required", "Authorization",
                         path)  # fmt: skip
        try:
            identity = await anyio.to_thread.run_sync(verifier.identity, bearer)
        except TokenRejected as exc:
            return error(401, str(exc), "Authorization", path)
        except IssuerUnreachable as exc:
            log.warning("OIDC: %s", exc)
            return error(503, "the identity provider's keys cannot be read now; try again later", None, path)
        self._as_identity(request, identity)
        return None

    async def _authenticated(self, request: Request, path: str) -> JSONResponse | None:
        """The refusal of a caller who is not who the service believes, or None (the identity headers then say
        who it is)."""
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        bearer = value.strip() if scheme.lower() == "bearer" else ""
        if is_ingest_path(path):
            # The ingestion API's own token, and nothing else: no reader's identity is taken or needed there.
            refused = ingest_refusal(path, request.headers.get("authorization", ""), self.ingest_token)
            if refused is not None:
                return error(refused[0], refused[1], "Authorization" if refused[0] == 401 else None, path)
        elif is_event_path(path):
            pass  # Slack, Jira and Confluence prove themselves by signature or secret, checked by the route
        elif path not in UNAUTHENTICATED_PATHS and looks_like_token(bearer):
            return await self._personal_token(request, bearer)
        elif path not in UNAUTHENTICATED_PATHS and self.state.verifier is not None:
            return await self._verified_identity(request, self.state.verifier, bearer)
        elif path not in UNAUTHENTICATED_PATHS and not self.state.has_token(request):
            return error(401, "a valid Authorization: Bearer token is required (RAG_SERVE_TOKEN)", "Authorization",
                         path)  # fmt: skip
        return None

    # --- what is admitted --------------------------------------------------------------------------------------
    def _mcp_refusal(self, request: Request, path: str) -> JSONResponse | None:
        """The MCP tools read the same headers: a call without a usable identity is refused before the protocol
        (the scope's headers, not request.headers, cached before an OIDC identity was put in)."""
        current = Headers(scope=request.scope)
        try:
            self.state.reader_from(current.get(USER_ID_HEADER), current.get(EMAIL_HEADER), current.get(GROUPS_HEADER))
        except IdentityError as exc:
            return error(exc.status, str(exc), exc.field, path)
        if path == MCP_PATH:
            # Mounted apps answer at "/mcp/"; a client posting to "/mcp" is served the same, not redirected.
            request.scope["path"] = MCP_PATH + "/"
            request.scope["raw_path"] = (MCP_PATH + "/").encode()
        return None

    def _admission_refusal(self, request: Request, path: str) -> JSONResponse | None:
        """A 429 when the service is full or the caller is over its rate, else None."""
        if self.in_flight >= self.state.settings.max_in_flight:
            response = error(429, f"the service is answering {self.in_flight} requests; try again shortly", None,
                             path)  # fmt: skip
            response.headers["Retry-After"] = ADMISSION_RETRY_AFTER_SECONDS
            return response
        if self.rate_limit is not None:
            current = Headers(scope=request.scope)
            who = (current.get(EMAIL_HEADER) or current.get(USER_ID_HEADER) or "anonymous").strip().lower()
            wait = self.rate_limit.allow(who)
            if wait:
                response = error(429, f"over {self.rate_limit.per_minute} requests a minute for this caller "
                                 "(RAG_SERVE_RATE_PER_MINUTE)", None, path)  # fmt: skip
                response.headers["Retry-After"] = str(wait)
                return response
        return None

    async def _guarded(self, request: Request, call_next: Next) -> Response:
        path = request.url.path
        if len(request.headers.getlist("host")) > 1:
            # Which one did the client mean? A proxy and this service could each read a different copy.
            return error(400, "the Host header is given more than once", "Host", path)
        host = host_of(request.headers.get("host", ""))
        if host is None:
            return error(400, "the Host header is not a host name or address with an optional port", "Host", path)
        if self.hosts is not None and host not in self.hosts:
            return error(400, "this Host is not served (RAG_SERVE_ALLOWED_HOSTS)", "Host", path)
        for name in IDENTITY_HEADERS:
            if len(request.headers.getlist(name)) > 1:
                # Which copy would a proxy have set? Neither is believed.
                return error(400, f"{name} is given more than once", name, path)
        if (refusal := await self._authenticated(request, path)) is not None:
            return refusal
        self._mark_admin(request)
        length = request.headers.get("content-length", "")
        if path.startswith("/v1/") and path != OWN_BODY_LIMIT and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return error(413, f"the request body is over {MAX_BODY_BYTES} bytes", "body", path)
        if is_mcp(path) and (refusal := self._mcp_refusal(request, path)) is not None:
            return refusal
        # /health and /metrics always answer: a load balancer must see a busy service as alive.
        admitted = path.startswith("/v1/") or is_mcp(path)
        if admitted and (refusal := self._admission_refusal(request, path)) is not None:
            return refusal
        self.in_flight += admitted
        try:
            return await call_next(request)
        except BodyTooLarge as exc:
            return error(exc.status_code, str(exc.detail), "body", path)
        except Exception:
            log.exception("unexpected error answering %s %s", request.method, route_of(request))
            return error(500, "internal error (the service logged the details)", None, path)
        finally:
            self.in_flight -= admitted
