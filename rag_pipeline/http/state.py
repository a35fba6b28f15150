"""What every route of one app shares (the service, its settings, metrics, models and limits), kept on
``app.state`` by the app factory and handed to routes as FastAPI dependencies: :func:`http_state` and
:func:`caller` (the request's reader, from its identity headers)."""

from __future__ import annotations

import dataclasses
import logging
import secrets
from dataclasses import dataclass

import anyio
from fastapi import Header, Request

from rag_pipeline.answers.ask import DEFAULT_LIMITS, ContextLimits
from rag_pipeline.answers.generate import Answer, AnswerModel
from rag_pipeline.http.errors import RequestRefused
from rag_pipeline.http.metrics import ServiceMetrics
from rag_pipeline.http.oidc import OidcVerifier
from rag_pipeline.retrieval.results import SearchResponse
from rag_pipeline.retrieval.rewrite import PlanOutcome, QueryRewriter
from rag_pipeline.serving.access import AccessQueries
from rag_pipeline.serving.event_receivers import EventReceivers
from rag_pipeline.serving.identity import DirectoryLookup, Reader, resolve_reader
from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.serving.search import ServedSearch
from rag_pipeline.serving.service import SearchService
from rag_pipeline.serving.tracing import Tracing
from rag_pipeline.settings import ServeSettings

log = logging.getLogger(__name__)

# What `model` may say in a chat request besides the configured model's own name.
SERVICE_MODEL_NAME = "rag-pipeline"
# Set by the service itself on a request whose verified caller is an admin (a copy a client sends is removed):
# the /v1 routes and the MCP tools read it with the identity headers.
ADMIN_HEADER = "X-Rag-Admin"
TOKEN_SCOPES_KEY = "rag.token_scopes"


@dataclass
class HttpState:
    """One app's shared parts; ``search_threads`` bounds the worker threads searches run in, so queries waiting
    for the index never take the threads /health and /metrics answer from."""

    service: SearchService
    settings: ServeSettings
    metrics: ServiceMetrics
    search_threads: anyio.CapacityLimiter
    access: AccessQueries
    directory: DirectoryLookup | None = None
    answers: AnswerModel | None = None
    answer_limits: ContextLimits = DEFAULT_LIMITS
    rewriter: QueryRewriter | None = None
    agent_rounds: int | None = None
    token: bytes | None = None  # RAG_SERVE_TOKEN
    verifier: OidcVerifier | None = None  # RAG_SERVE_AUTH=oidc
    ingest: IngestLauncher | None = None  # the ingestion API's jobs (RAG_INGEST_TOKEN)
    events: EventReceivers | None = None  # Slack events, Jira/Confluence webhooks (their secrets)

    @property
    def tracing(self) -> Tracing:
        return self.service.tracing  # the service's: its searches' spans and the requests' spans go to one place

    def has_token(self, request: Request) -> bool:
        """Whether the request carries the service token (always, where none is set)."""
        if self.token is None:
            return True
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        # Header values arrive decoded as Latin-1: encoding them back gives the bytes the client sent.
        return scheme.lower() == "bearer" and secrets.compare_digest(value.strip().encode("latin-1"), self.token)

    def reader_from(self, user_id: str | None, email: str | None, groups: str | None) -> Reader:
        return resolve_reader(
            user_id, email, groups, trusted_proxy=self.settings.trusted_proxy, directory=self.directory
        )

    def answer_model(self, name: str | None) -> AnswerModel:
        """The configured answer model, when ``name`` names it (or nothing); a 503 or 400 naming ``model``."""
        if self.answers is None:
            raise RequestRefused(
                503, "model", "answers are off: set RAG_ANSWER_MODEL (and OPENAI_API_KEY) on the service"
            )
        if name in (None, "", SERVICE_MODEL_NAME, self.answers.model):
            return self.answers
        raise RequestRefused(
            400, "model", f"model {name!r} is not served; use {self.answers.model!r} or {SERVICE_MODEL_NAME!r}"
        )

    def observed(self, served: ServedSearch) -> SearchResponse:
        """A search's stage timings and result count into the metrics (every route that searches); its response."""
        response = served.response
        self.metrics.observe_search(
            response.mode,
            {k: v / 1000 for k, v in served.timing_ms.items() if k != "wait"},
            served.waited_seconds,
            len(response.results),
            requested=response.requested_mode,
        )
        return response

    def planned(self, query: str) -> PlanOutcome:
        """The rewrite model's plan for ``query`` (traced, and counted in the metrics); only with a rewriter."""
        if self.rewriter is None:
            raise RequestRefused(503, "rewrite", "rewriting is off: set RAG_REWRITE_MODEL on the service")
        with self.tracing.stage("rewrite"):
            plan = self.rewriter.plan(query)
        self.observe_rewrite(plan)
        return plan

    def observe_rewrite(self, plan: PlanOutcome) -> None:
        outcome = "fallback" if plan.plan is None else "cached" if plan.cached else "planned"
        self.metrics.observe_rewrite(outcome, plan.seconds)

    def observe_answer(self, route: str, answer: Answer, seconds: float) -> None:
        usage = answer.usage
        outcome = "failed" if answer.failure else "answered" if answer.context else "no_documents"
        if answer.failure:
            log.warning("answered without the model on %s: %s", route, answer.failure)
        self.metrics.observe_answer(route, outcome, usage.prompt_tokens, usage.completion_tokens, usage.cost_usd,
                                    len(answer.invalid_citations), seconds)  # fmt: skip
        if answer.invalid_citations:
            log.info("answer cited %d number(s) not in its context; dropped", len(answer.invalid_citations))


def http_state(request: Request) -> HttpState:
    """The app's shared parts (a FastAPI dependency)."""
    state: HttpState = request.app.state.rag
    return state


def caller(
    request: Request,
    x_user_id: str | None = Header(None),
    x_user_email: str | None = Header(None),
    x_user_groups: str | None = Header(None),
    x_rag_admin: str | None = Header(None),
) -> Reader:
    """The reader of a request, from its identity headers (a FastAPI dependency of every /v1 route)."""
    reader = http_state(request).reader_from(x_user_id, x_user_email, x_user_groups)
    return dataclasses.replace(reader, admin=True) if x_rag_admin == "1" else reader
