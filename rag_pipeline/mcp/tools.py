"""The MCP tools, one module-level function each (as the HTTP routes are one module each): validate the
arguments into the application layer's request model, call the server's backend as the call's reader, and turn
what the caller may be told into a :class:`ToolError` (a failed tool call, never a traceback).

:data:`TOOLS` is what :func:`rag_pipeline.mcp.server.build_mcp_server` registers; a function's docstring is the
description a model reads (``{sources}`` and ``{source_names}`` filled from the source registry).
"""

from __future__ import annotations

import time
import uuid
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ValidationError

from rag_pipeline.answers.wording import reader_language, say
from rag_pipeline.mcp.backends import AnswersOff
from rag_pipeline.mcp.server import wiring
from rag_pipeline.retrieval.tree_view import DEFAULT_TREE_DEPTH, DEFAULT_TREE_LIMIT, TreeView
from rag_pipeline.serving.access import AccessRefused
from rag_pipeline.serving.active_tools import SESSION_HEADER, ActiveSetRefused
from rag_pipeline.serving.feedback import FeedbackDisabled
from rag_pipeline.serving.refusal import first_invalid
from rag_pipeline.serving.schemas import (
    ActiveToolsRequest,
    FeedbackRequest,
    SearchRequest,
    ToolOutcomeRequest,
    ToolSearchRequest,
)
from rag_pipeline.serving.search import search_status
from rag_pipeline.serving.shared_index import IndexUnavailable
from rag_pipeline.serving.tool_selection import ActiveAction

# A tool result lands in a model's context window: fewer results than the HTTP API's.
MAX_TOOL_TOP_K = 50
MAX_ID_CHARS = 1000
MAX_NAME_CHARS = 200
MAX_QUESTION_CHARS = 8000

ModelT = TypeVar("ModelT", bound=BaseModel)
ResultT = TypeVar("ResultT")


def validated(model: type[ModelT], arguments: dict[str, Any]) -> ModelT:
    """The arguments as the use case's request; a :class:`ToolError` naming the first field at fault."""
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        field, message = first_invalid(exc)
        raise ToolError(f"{field}: {message}") from None


async def run_call(call: Callable[[], ResultT], unavailable: str = "the index is not available now") -> ResultT:
    """``call`` in a worker thread (searches block); an index lent to a writer or a stopped service is a tool
    error saying so."""
    try:
        return await anyio.to_thread.run_sync(call)
    except IndexUnavailable as exc:
        raise ToolError(f"{unavailable}: {exc}") from None


def document_id_argument(document_id: str) -> str:
    if not document_id.strip() or len(document_id) > MAX_ID_CHARS:
        raise ToolError("document_id: must be a document id from search_documents")
    return document_id


async def search_documents(
    ctx: Context[Any, Any],
    query: str,
    top_k: int = 10,
    source: str | None = None,
    since: str | None = None,
    until: str | None = None,
    mode: str = "routed",
    min_score: float | None = None,
    path: str | None = None,
) -> dict[str, Any]:
    """Search the documents the caller may read ({sources}). mode: routed (default: hybrid with issue keys, links
    and ids looked up exactly first), hybrid, vector, bm25 or reranked. source: one of {source_names}. since/until: ISO
    dates of last activity. min_score: 0-1, drop results less likely relevant than this (each result's
    relevance)."""
    backend, reader = wiring(ctx)
    arguments = {"query": query, "top_k": min(top_k, MAX_TOOL_TOP_K) if top_k >= 1 else top_k, "source": source,
                 "since": since, "until": until, "mode": mode, "min_score": min_score, "path": path}  # fmt: skip
    request = validated(SearchRequest, arguments)
    started = time.perf_counter()
    found = await run_call(lambda: backend.search(request, reader))
    # The design's tool-result shape: the query echoed, how many results, the mode that ran, the time taken; and,
    # for nothing found, the sentence an agent can pass on to its reader in the question's language.
    count = len(found["results"])
    result = {
        "query": request.query,
        "status": search_status(request.mode, found["mode"], count),
        "results_count": count,
        "mode": found["mode"],
        "count": count,  # the same as results_count, kept for the clients that read it
        "execution_time_ms": round((time.perf_counter() - started) * 1000, 1),
        "warnings": found.get("warnings", []),
        "results": found["results"],
    }
    if not found["results"]:
        result["message"] = say("no_results", reader_language(request.query))
    return result


async def list_containers(
    ctx: Context[Any, Any],
    prefix: str | None = None,
    root_path: str | None = None,
    max_depth: int = DEFAULT_TREE_DEPTH,
    offset: int = 0,
    limit: int = DEFAULT_TREE_LIMIT,
) -> dict[str, Any]:
    """What the caller can search: sources, then channels/projects with their document counts and latest activity,
    only where the caller may read a document. prefix: a path's beginning (slack/#eng, jira/OPS); search_documents
    takes the same as path. nodes: the tree from root_path (a source, container, document or Confluence page path;
    every source when omitted) down max_depth levels (0-32; 1: sources and containers, 2: their documents, deeper:
    Confluence child pages), each with kind, level, path, relative_path and counts, depth first; a page of limit
    (1-500) from offset, next_offset for the next page."""
    backend, reader = wiring(ctx)
    if prefix is not None and len(prefix) > MAX_NAME_CHARS:
        raise ToolError(f"prefix: at most {MAX_NAME_CHARS} characters")
    view = validated(TreeView, {"root_path": root_path, "max_depth": max_depth, "offset": offset, "limit": limit})
    return await run_call(lambda: backend.tree_view(reader, prefix, view))


async def search_tools(
    ctx: Context[Any, Any],
    query: str,
    top_k: int | None = None,
    mode: str = "multi-signal",
    categories: list[str] | None = None,
    min_similarity: float | None = None,
    include_full_params: bool = True,
    max_description_length: int | None = None,
    exclude_active: bool = True,
) -> dict[str, Any]:
    """The few tools a task needs, out of every tool indexed (a catalog and MCP servers): each with its
    description and input schema, ranked by 0.5 semantic match + 0.3 usage + 0.2 success, the critical ones always
    included, and the prompt tokens they cost against loading every tool. mode: multi-signal (default), vector,
    bm25 or hybrid. categories: only tools tagged with one of these. min_similarity: 0-1, drop tools less similar
    to the task. include_full_params=false leaves the input schemas out and max_description_length cuts the
    descriptions (fewer tokens). Tools already in the caller's active set (activate_tools; per X-Session-Id) are
    left out unless exclude_active=false."""
    backend, reader = wiring(ctx)
    arguments = {"query": query, "top_k": top_k, "mode": mode, "categories": categories,
                 "min_similarity": min_similarity, "include_full_params": include_full_params,
                 "max_description_length": max_description_length, "exclude_active": exclude_active}  # fmt: skip
    request = validated(ToolSearchRequest, arguments)
    session = session_of(ctx)
    return await run_call(lambda: backend.search_tools(request, reader, session))


_SESSIONS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def session_of(ctx: Context[Any, Any]) -> str:
    """The call's session, whose active tool set it reads: over HTTP the MCP session id where the transport keeps
    sessions, else the client's ``X-Session-Id`` (the service's MCP endpoint is stateless), else none (the reader's
    own set); over stdio an id for the connection (the process's one session)."""
    try:
        headers, session = ctx.headers, ctx.session
    except ValueError:  # called outside a request (the SDK's own tool manager in tests): no session
        return ""
    if headers is not None:
        lowered = {str(k).lower(): str(v) for k, v in headers.items()}
        found = lowered.get("mcp-session-id") or lowered.get(SESSION_HEADER.lower()) or ""
        return found[:MAX_NAME_CHARS]
    if session not in _SESSIONS:
        _SESSIONS[session] = f"mcp-{uuid.uuid4().hex}"
    return _SESSIONS[session]


async def _active(ctx: Context[Any, Any], action: ActiveAction, names: list[str] | None = None) -> dict[str, Any]:
    backend, reader = wiring(ctx)
    checked = validated(ActiveToolsRequest, {"names": names}).names if names is not None else []
    session = session_of(ctx)
    try:
        return await run_call(lambda: backend.active_tools(action, checked, reader, session))
    except ActiveSetRefused as exc:
        raise ToolError(str(exc)) from None


async def activate_tools(ctx: Context[Any, Any], names: list[str]) -> dict[str, Any]:
    """Add tools (names search_tools returned) to this session's active set: the tools the caller has loaded, which
    search_tools leaves out from then on. Refused, naming names, for a tool not indexed or more tools than a set
    holds. Returns the active set."""
    return await _active(ctx, "activate", names)


async def deactivate_tools(ctx: Context[Any, Any], names: list[str]) -> dict[str, Any]:
    """Remove tools from this session's active set (search_tools may return them again)."""
    return await _active(ctx, "deactivate", names)


async def get_active_tools(ctx: Context[Any, Any]) -> dict[str, Any]:
    """This session's active tools: the critical set until others are activated."""
    return await _active(ctx, "get")


async def reset_active_tools(ctx: Context[Any, Any]) -> dict[str, Any]:
    """This session's active set back to the critical set."""
    return await _active(ctx, "reset")


async def record_tool_outcome(ctx: Context[Any, Any], name: str, success: bool, calls: int = 1) -> dict[str, Any]:
    """Record whether calling a tool (a name search_tools returned) worked; tool search ranks tools that get used
    and work higher."""
    backend, reader = wiring(ctx)
    request = validated(ToolOutcomeRequest, {"success": success, "calls": calls})
    if not name or len(name) > MAX_NAME_CHARS:
        raise ToolError(f"name: 1-{MAX_NAME_CHARS} characters")
    recorded = await run_call(lambda: backend.tool_outcome(name, request, reader))
    if recorded is None:
        raise ToolError(f"name: no indexed tool is named {name!r}")
    return recorded


async def ask(ctx: Context[Any, Any], question: str) -> dict[str, Any]:
    """Answer a question from the documents the caller may read ({sources}), as the service's chat answers it: the
    answer cites its documents as [1], [2] (the numbers of sources); where the answer model fails, answer_error says
    why and sources are still the documents found."""
    backend, reader = wiring(ctx)
    if not question.strip() or len(question) > MAX_QUESTION_CHARS:
        raise ToolError(f"question: 1-{MAX_QUESTION_CHARS} characters")
    try:
        return await run_call(lambda: backend.ask(question, reader))
    except AnswersOff as exc:
        raise ToolError(str(exc)) from None


async def rate_document(ctx: Context[Any, Any], query: str, document_id: str, grade: int) -> dict[str, Any]:
    """Say how relevant a document search_documents returned was to what the caller asked: grade 0 (not relevant),
    1 (relevant) or 2 (exactly what was needed). Kept only where the operator turned readers' feedback on; it
    becomes an eval set of real questions."""
    backend, reader = wiring(ctx)
    request = validated(FeedbackRequest, {"query": query, "document_id": document_id, "grade": grade})
    try:
        recorded = await anyio.to_thread.run_sync(backend.feedback, request, reader)
    except (IndexUnavailable, FeedbackDisabled) as exc:
        raise ToolError(str(exc)) from None
    if recorded is None:
        raise ToolError(f"document {document_id!r} not found")
    return recorded


async def get_document(ctx: Context[Any, Any], document_id: str) -> dict[str, Any]:
    """One document the caller may read, by the document_id search_documents returned."""
    backend, reader = wiring(ctx)
    document_id = document_id_argument(document_id)
    document = await run_call(lambda: backend.document(document_id, reader))
    if document is None:
        raise ToolError(f"document {document_id!r} not found")
    return document


async def whoami(ctx: Context[Any, Any], person: str | None = None) -> dict[str, Any]:
    """Who the caller is to the search: their accounts, the groups they hold (and the grant behind each), their
    private channels, and when each source's directory was synced. person: another person's email or account id
    (admins only)."""
    backend, reader = wiring(ctx)
    try:
        return await run_call(lambda: backend.whois(reader, person), "the search service is not available now")
    except AccessRefused as exc:
        raise ToolError(f"{exc.field}: {exc}") from None


async def explain_access(ctx: Context[Any, Any], document_id: str, person: str | None = None) -> dict[str, Any]:
    """Why the caller may read a document (the grant that admits it). A document the caller may not read is
    reported as not found. person: another person (admins only), for whom a hidden document's restriction is
    named."""
    backend, reader = wiring(ctx)
    document_id = document_id_argument(document_id)
    try:
        return await run_call(lambda: backend.explain(document_id, reader, person))
    except AccessRefused as exc:
        raise ToolError(f"{exc.field}: {exc}") from None


Tool = Callable[..., Coroutine[Any, Any, dict[str, Any]]]
# In the order a client lists them.
TOOLS: tuple[Tool, ...] = (
    search_documents,
    ask,
    list_containers,
    search_tools,
    activate_tools,
    deactivate_tools,
    get_active_tools,
    reset_active_tools,
    record_tool_outcome,
    rate_document,
    get_document,
    whoami,
    explain_access,
)
