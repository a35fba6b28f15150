"""The app factory: wiring only. It builds the shared parts (:class:`~rag_pipeline.http.state.HttpState`), the MCP
server, the guard middleware and the error handlers, and includes the routers: ``GET /health``, ``POST /v1/search``,
``POST /v1/chat/completions`` and ``GET /v1/models`` (OpenAI-compatible), ``GET /v1/documents/{id}``,
``GET /v1/tree``, ``POST /v1/tools/search`` and ``/v1/tools/{name}/outcome``, ``GET /v1/whois``,
``GET /v1/explain/{id}``, ``GET /metrics``, the ingestion API where configured, the event and webhook receivers
(``POST /events/{source}``: Slack, Jira, Confluence), and the MCP tools at ``/mcp``."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from fastapi import FastAPI
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings

from rag_pipeline.answers.ask import DEFAULT_LIMITS, ContextLimits
from rag_pipeline.answers.generate import AnswerModel
from rag_pipeline.http.errors import install_error_handlers
from rag_pipeline.http.guard import MCP_PATH, Guard
from rag_pipeline.http.limits import BodyLimit, allowed_hosts
from rag_pipeline.http.metrics import ServiceMetrics
from rag_pipeline.http.oidc import OidcVerifier
from rag_pipeline.http.routes import access, chat, documents, events, feedback, health, metrics, models, search, tools
from rag_pipeline.http.routes import ingest as ingest_routes
from rag_pipeline.http.state import ADMIN_HEADER, HttpState
from rag_pipeline.mcp.app import build_mcp_server
from rag_pipeline.mcp.backends import LocalTools
from rag_pipeline.retrieval.rewrite import QueryRewriter
from rag_pipeline.serving.access import AccessQueries
from rag_pipeline.serving.event_receivers import EventReceivers
from rag_pipeline.serving.identity import EMAIL_HEADER, GROUPS_HEADER, USER_ID_HEADER, DirectoryLookup, Reader
from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.serving.service import SearchService
from rag_pipeline.serving.tokens import TokenStore
from rag_pipeline.settings import ServeSettings

# Searches run in worker threads of their own, so queries waiting for the index (up to RAG_STORE_WAIT_SECONDS)
# never take the threads /health and /metrics answer from.
SEARCH_THREADS = 32
ROUTERS = (health, search, chat, models, documents, feedback, tools, access, metrics, events)


def _service_metrics(service: SearchService) -> ServiceMetrics:
    stats = service.index.stats
    return ServiceMetrics(
        lambda: stats.opened_at,
        lambda: stats.hand_overs,
        lambda: stats.last_open_seconds,
        service.index_written,
        caches={
            "search": lambda: (service.search_cache.hits, service.search_cache.misses),
            "document": lambda: (service.document_cache.hits, service.document_cache.misses),
        },
    )


def _verifier(settings: ServeSettings) -> OidcVerifier | None:
    if settings.auth != "oidc":
        return None
    return OidcVerifier(
        settings.oidc_issuer or "",
        settings.oidc_audience or "",
        settings.oidc_jwks_url,
        settings.oidc_claim,
        settings.oidc_algorithms,
    )


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
    events: EventReceivers | None = None,
    agent_rounds: int | None = None,
) -> FastAPI:
    """The HTTP application over ``service``; ``settings`` say whether a token is required, whether
    ``X-User-Groups`` is believed and which Host names are answered (on loopback: loopback names only, which
    stops DNS-rebinding pages; ``listen_host`` is the address the service listens on); ``directory`` resolves
    callers to their accounts and groups; ``whois`` and ``explain`` read ``directory_file`` and ``links_file``."""
    state = HttpState(
        service=service,
        settings=settings,
        metrics=_service_metrics(service),
        search_threads=anyio.CapacityLimiter(SEARCH_THREADS),
        # whois/explain read the directory file itself (a person, not just a principal): where the service has
        # none, they answer that nobody is known.
        access=AccessQueries(directory_file, links_file, service.document_acl),
        directory=directory,
        answers=answers,
        answer_limits=answer_limits,
        rewriter=rewriter,
        agent_rounds=agent_rounds,
        token=settings.token.get_secret_value().encode() if settings.token is not None else None,
        verifier=_verifier(settings),
        ingest=ingest,
        events=events,
    )
    if events is not None:  # each pushed change's arrival -> searchable, once its targeted sync wrote it
        events.syncs.on_fresh = state.metrics.observe_event_freshness
    ingest_token = settings.ingest_token.get_secret_value().encode() if settings.ingest_token is not None else None

    def mcp_reader(ctx: Context[Any, Any]) -> Reader:
        headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
        reader = state.reader_from(
            headers.get(USER_ID_HEADER.lower()), headers.get(EMAIL_HEADER.lower()), headers.get(GROUPS_HEADER.lower())
        )
        return dataclasses.replace(reader, admin=True) if headers.get(ADMIN_HEADER.lower()) == "1" else reader

    mcp_server = build_mcp_server(LocalTools(service, state.access, answers, answer_limits), mcp_reader)
    # The guard's Host check covers /mcp too (the SDK's own check would refuse the names of a proxy in front).
    mcp_app = mcp_server.streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    tracing = state.tracing

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
            if events is not None:
                events.syncs.stop()
            await anyio.to_thread.run_sync(service.close)  # waits for queries in flight: not on the event loop
            await anyio.to_thread.run_sync(tracing.shutdown)  # the spans still buffered go out

    app = FastAPI(
        title="rag-pipeline search",
        description="Permission-aware search over the index the pipeline writes (every registered source).",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.rag = state
    app.middleware("http")(Guard(state, allowed_hosts(listen_host, settings.allowed_hosts), tokens, ingest_token))
    install_error_handlers(app)
    for module in ROUTERS:
        app.include_router(module.router)
    if ingest is not None and ingest_token is not None:
        # Only where the service has an ingestion token (without one its paths answer 404 from the guard).
        app.include_router(ingest_routes.router)
    app.mount(MCP_PATH, mcp_app)
    app.add_middleware(BodyLimit)
    tracing.instrument(app)  # outermost: the request's span covers the limits and the authentication too
    return app
