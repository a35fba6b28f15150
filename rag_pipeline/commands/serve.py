"""``rag-pipeline serve``: the search service over HTTP (FastAPI + uvicorn), with the MCP tools at ``/mcp``."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import socket
import sys
import time
from typing import Any

from rag_pipeline.commands.arguments import add_data_dir, at_least
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.composition import search_service
from rag_pipeline.serving.service_record import ServiceRecord, clear_service, live_service, record_service
from rag_pipeline.settings import Settings

LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (a token is then optional)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_port_free(host: str, port: int) -> None:
    """Fail with one line before loading models (seconds) when the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(
                f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port or --host"
            ) from None


def configure_service_logging() -> None:
    """The service's own events (hand-overs, unexpected errors) at INFO on stderr, libraries at WARNING. Set
    before the MCP SDK is loaded: it configures the root logger itself when nobody has (at its own level,
    through its own handler). Nothing the service logs holds a query or a token."""
    from rag_pipeline.http.request_id import RequestIdFilter

    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s",
    )
    for handler in logging.getLogger().handlers:
        # Every line names the request it was logged for (X-Request-Id), "-" outside one.
        handler.addFilter(RequestIdFilter())
    logging.getLogger("rag_pipeline.serving").setLevel(logging.INFO)
    logging.getLogger("mcp").setLevel(logging.WARNING)


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the index over HTTP (search API, MCP tools, Prometheus metrics) as each caller may read it",
        description="Loads the dense model, the reranker and the BM25 encoder once and serves the index the pipeline "
        "writes: GET /health, POST /v1/search, GET /v1/documents/{id}, GET /metrics and the MCP tools at /mcp. "
        "Callers say who they are with X-User-Id and/or X-User-Email; X-User-Groups is believed only with "
        "RAG_SERVE_TRUSTED_PROXY=1. With RAG_SERVE_TOKEN set, every route but /health needs "
        "'Authorization: Bearer <token>'; a host other than loopback requires it. The embedded index is handed to "
        "a pipeline step that needs it and taken back when the step is done (queries wait meanwhile). "
        "Guide: docs/guides/serving.md.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument("--port", type=at_least(1), default=8000, help="port to listen on (default: %(default)s)")
    add_data_dir(serve)
    serve.add_argument(
        "--access-log", action="store_true", help="log every request's method, path and status (never the body)"
    )
    serve.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if settings.serve.auth == "oidc" and not (settings.serve.oidc_issuer and settings.serve.oidc_audience):
        raise CommandError("RAG_SERVE_AUTH=oidc needs RAG_OIDC_ISSUER and RAG_OIDC_AUDIENCE")
    if settings.serve.auth == "token" and settings.serve.token is None and not is_loopback(args.host):
        raise CommandError(
            f"refusing to listen on {args.host} without RAG_SERVE_TOKEN: set it to a secret that callers send as "
            "'Authorization: Bearer <token>', or listen on 127.0.0.1"
        )
    running = live_service(settings.data_dir)
    if running is not None:
        raise CommandError(
            f"a search service (pid {running.pid}) already serves {settings.data_dir} at {running.url}: send "
            "callers there (its /v1 API and /mcp), or stop it first; one folder is served by one service"
        )
    _check_port_free(args.host, args.port)
    import uvicorn

    from rag_pipeline.answers.ask import ContextLimits
    from rag_pipeline.answers.generate import AnswerModel
    from rag_pipeline.directory.lookup import DirectoryLookup
    from rag_pipeline.http.app import create_app
    from rag_pipeline.retrieval.rewrite import QueryRewriter
    from rag_pipeline.serving.event_receivers import build_event_receivers, wants_events
    from rag_pipeline.serving.ingest_runs import IngestLauncher
    from rag_pipeline.serving.pushed_documents import push_limits
    from rag_pipeline.serving.tokens import TokenStore

    configure_service_logging()
    print(f"loading the models ({settings.dense_model}) ...", file=sys.stderr, flush=True)
    service = search_service(settings)
    directory = DirectoryLookup(settings.paths.directory, settings.identity_links_file)
    answers = (
        AnswerModel(
            settings.answer_model,
            max_tokens=settings.answer_max_tokens,
            temperature=settings.answer_temperature,
            language=settings.answer_language,
        )
        if settings.answer_model
        else None
    )
    limits = ContextLimits(settings.answer_documents, settings.answer_context_chars)
    rewriter = (
        QueryRewriter(settings.rewrite_model, cache_path=settings.paths.rewrite_plans)
        if settings.rewrite_model
        else None
    )
    # The ingestion API and the event receivers share one launcher: one sync job at a time for both.
    wanted = settings.serve.ingest_token or wants_events(settings.serve)
    pushes = push_limits(settings)
    launcher = IngestLauncher(settings.data_dir, settings.live_sources, push_limits=pushes) if wanted else None
    app = create_app(
        service,
        settings.serve,
        listen_host=args.host,
        directory=directory,
        directory_file=settings.paths.directory,
        links_file=settings.identity_links_file,
        answers=answers,
        answer_limits=limits,
        rewriter=rewriter,
        tokens=TokenStore(settings.paths.tokens),
        on_stop=lambda: clear_service(settings.data_dir, os.getpid()),
        ingest=launcher,
        events=build_event_receivers(settings.serve, launcher),
        agent_rounds=settings.agent_max_iterations if settings.agent else None,
    )
    where = "a Qdrant server" if settings.qdrant.url else str(settings.paths.qdrant)
    token = "OIDC" if settings.serve.auth == "oidc" else "required" if settings.serve.token else "off"
    print(
        f"serving the index at {where} on http://{args.host}:{args.port} "
        f"(search: POST /v1/search, MCP: /mcp, metrics: /metrics; token {token})",
        file=sys.stderr,
        flush=True,
    )
    # Where readers on this machine find the service (the stdio MCP server sends its calls here).
    local_host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
    record_service(
        settings.data_dir,
        ServiceRecord(os.getpid(), f"http://{local_host}:{args.port}", settings.serve.auth, time.time()),
    )
    try:
        _run_uvicorn(uvicorn, app, args)
    finally:
        clear_service(settings.data_dir, os.getpid())
    return 0


def _run_uvicorn(uvicorn: Any, app: Any, args: argparse.Namespace) -> None:
    from rag_pipeline.http.limits import uvicorn_log_config

    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="info",
        access_log=args.access_log,
        log_config=uvicorn_log_config(),  # the access log without query strings
    )
