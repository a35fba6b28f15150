"""``rag-pipeline mcp``: the search tools as a Model Context Protocol server over stdio, for one reader."""

from __future__ import annotations

import argparse
from typing import Any

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.commands.serve import configure_service_logging
from rag_pipeline.composition import search_service
from rag_pipeline.settings import Settings

# How long a tool call waits for an index a writer holds (an `index` run, a Dagster step) before it is refused
# naming the holder: agents give a tool call tens of seconds at most, and a write can hold the folder for
# minutes, so saying so at once beats an answer that comes after the agent gave up (issue 54). A step's short
# turn (a Dagster sync writes in seconds) still fits.
TOOL_CALL_WAIT_SECONDS = 5.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="serve the search tools to an MCP client (an agent) over stdio, as one reader",
        description="A Model Context Protocol server on stdin/stdout with the tools search_documents and "
        "get_document. Every call runs as the reader given here (--user/--email/--groups, or RAG_MCP_USER / "
        "RAG_MCP_EMAIL); the model calling the tools cannot change it. Over HTTP, `rag-pipeline serve` serves "
        "the same tools at /mcp with each caller's identity headers.",
    )
    mcp.add_argument("--user", default=None, help="reader's user id (a Slack user id or Jira account id)")
    mcp.add_argument("--email", default=None, help="reader's email")
    mcp.add_argument("--groups", default=None, help="reader's groups, comma-separated (e.g. slack:T0UBUNTU:members)")
    add_data_dir(mcp)
    mcp.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.answers.ask import ContextLimits
    from rag_pipeline.answers.generate import AnswerModel
    from rag_pipeline.directory.lookup import DirectoryLookup
    from rag_pipeline.mcp.app import build_mcp_server
    from rag_pipeline.mcp.backends import LocalTools
    from rag_pipeline.serving.access import AccessQueries
    from rag_pipeline.serving.identity import IdentityError, Reader, resolve_reader
    from rag_pipeline.serving.service import SearchService

    user, email = args.user or settings.serve.mcp_user, args.email or settings.serve.mcp_email
    if not (user or email):
        raise CommandError(
            "the MCP server searches as one reader: give --user ID and/or --email ADDRESS "
            "(or set RAG_MCP_USER / RAG_MCP_EMAIL)"
        )
    try:
        # The operator who starts a stdio server vouches for the reader, groups included (as `search --groups`).
        # Without --groups the directory resolves the reader, as it does for `search --user`.
        reader = resolve_reader(
            user,
            email,
            args.groups,
            trusted_proxy=True,
            directory=DirectoryLookup(settings.paths.directory, settings.identity_links_file),
        )
    except IdentityError as exc:
        flag = {"X-User-Id": "--user", "X-User-Email": "--email", "X-User-Groups": "--groups"}[exc.field]
        raise CommandError(str(exc).replace(exc.field, flag)) from None
    # stdout is the protocol's channel: anything else printed there would break the client's session.
    configure_service_logging()
    services: list[SearchService] = []

    def open_local() -> LocalTools:
        wait = min(float(settings.store_wait_seconds), TOOL_CALL_WAIT_SECONDS)
        service = search_service(settings, wait_seconds=wait)
        service.start()
        services.append(service)
        access = AccessQueries(settings.paths.directory, settings.identity_links_file, service.document_acl)
        # The ask tool answers as `ask` and the service's chat do, with the configured answer model (none: off).
        model = None
        if settings.answer_model:
            model = AnswerModel(settings.answer_model, max_tokens=settings.answer_max_tokens,
                                temperature=settings.answer_temperature, language=settings.answer_language)  # fmt: skip
        limits = ContextLimits(settings.answer_documents, settings.answer_context_chars)
        return LocalTools(service, access, model, limits)

    def fixed_reader(_ctx: Any) -> Reader:
        return reader

    backend = _running_service_tools(args, settings, user, email, open_local)
    try:
        build_mcp_server(backend or open_local(), fixed_reader).run("stdio")
    finally:
        for service in services:
            service.close()
    return 0


def _running_service_tools(
    args: argparse.Namespace, settings: Settings, user: str | None, email: str | None, open_local: Any
) -> Any:
    """The tools over a running ``rag-pipeline serve`` of this folder, when one runs and can search as this
    reader: it holds the embedded index, which this process would otherwise wait for (issue 54). None otherwise."""
    import logging

    from rag_pipeline.mcp.remote import FallbackTools, RefusedBesideService, RemoteTools
    from rag_pipeline.serving.service_record import live_service

    running = live_service(settings.data_dir)
    if running is None or settings.qdrant.url:
        return None  # nobody holds the folder (or a Qdrant server, which every process can open)
    log = logging.getLogger("rag_pipeline.mcp")
    if running.auth != "token" or args.groups:
        # An OIDC service wants a signed-in caller, and groups given here are not believed by a service that
        # resolves them itself: each call is refused at once, saying what to use (issue 54: it waited minutes).
        why = "it signs callers in with OIDC" if running.auth != "token" else "it does not take --groups from a caller"
        message = (
            f"a search service (pid {running.pid}) serves this folder at {running.url} and this stdio server cannot "
            f"send its calls there ({why}): connect the agent to {running.url}/mcp instead, or stop the service"
        )
        log.warning("%s", message)
        refused = RefusedBesideService(lambda: live_service(settings.data_dir) is not None, message)
        return FallbackTools(refused, open_local)
    token = settings.serve.token.get_secret_value() if settings.serve.token else None
    log.info("tool calls go to the search service at %s (pid %d)", running.url, running.pid)
    return FallbackTools(RemoteTools(running.url, user, email, token), open_local)
