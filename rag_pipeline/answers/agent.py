"""An answer model that chooses its tools (the design's LLM agent flow): instead of one search and one answer, the
model is given ``search_documents``, ``get_document`` and ``list_containers`` through the OpenAI tool-calling
protocol and decides whether and how often to call them, at most ``max_iterations`` rounds, then answers.

Every tool runs as the caller: the tools are bound to the reader's own search, document and tree functions, and
no argument names a reader, so nothing a model writes can widen what it sees. A tool that fails (an unknown
document, a bad argument) is reported to the model as the tool's result, never raised. Documents the tools return
are numbered in the order they first appear; the answer cites those numbers, and a citation of a number no tool
returned is dropped and reported, as in the one-search answer. A model that answers without calling any tool still
answers, with a notice.

A model that fails on its first round (an API error, a time-out: nothing was searched yet) does not leave the
reader with nothing: the question is searched as the plain answer route searches it (``fallback``) and the
documents come back with the reason, unanswered. A model that fails later keeps what its tools found. Where the
server returns the model's reasoning (``reasoning_content``), every round's is kept on the answer.

With tool search (RAG_AGENT_TOOL_SEARCH, ``AgentTools.find_tools``) the agent picks its tools as the RAG tool-search
design asks of an agent: it starts from its critical set (``search_documents``) and the tools tool search finds for
the question, and is offered ``search_tools`` to find and load more; a tool not loaded is refused to the model with
the way to load it. Only the agent's own tools can be loaded (tool search returns names; the agent runs nothing
else), so they are found where the operator indexes them (the service's own MCP server in RAG_TOOLS_MCP_SERVERS,
or a catalog naming them).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from rag_pipeline.answers.citations import parse_citations
from rag_pipeline.answers.context import DEFAULT_CONTEXT_DOCUMENTS, ContextDocument, build_context, capped, one_line
from rag_pipeline.answers.generate import (
    Answer,
    AnswerModel,
    Usage,
    joined_reasoning,
    model_failure,
    reasoning_of,
    unanswered,
)
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.retrieval.tree_view import MAX_TREE_DEPTH, TreeView
from rag_pipeline.sources.registry import document_sources, searched_sources_phrase

log = logging.getLogger(__name__)

AGENT_PROMPT = """You answer questions for the people of a company from what they wrote in {sources}.
You cannot see any document until you call a tool: use search_documents (several times if the first search is not
enough, with other words or filters), get_document for a whole document, and list_containers to see which channels
and projects exist. Answer only from documents the tools returned; if they do not answer the question, say you
don't know. Each document a tool returns has a number [N]: cite the document behind every statement with it, like
[1] or [2][3]. Never cite a number no tool gave you. Answer in the language of the question, briefly."""

# Tree nodes one tool call returns: a page the model reads whole (the reader's tree pages up to 500 for other faces).
AGENT_TREE_LIMIT = 100
DEFAULT_AGENT_TREE_LIMIT = 50


def agent_tools(active: Collection[str] | None = None) -> list[dict[str, Any]]:
    """The tools offered to the model; ``source`` may name any registered document source. ``active``: with tool
    search (RAG_AGENT_TOOL_SEARCH), only these of the agent's own tools, and ``search_tools`` to find more."""
    offered = [
        {
            **tool,
            "function": {**_described(tool["function"]), "parameters": _with_sources(tool["function"]["parameters"])},
        }
        for tool in _TOOLS
        if active is None or tool["function"]["name"] in active
    ]
    return offered if active is None else [*offered, TOOL_SEARCH_TOOL]


# With tool search, the agent starts from its critical set and finds the rest (the design's RAG tool search).
AGENT_CRITICAL_TOOLS = ("search_documents",)
TOOL_SEARCH_PROMPT = (
    "\nOnly some of your tools are loaded. To do something they cannot, call search_tools with the task in a few "
    "words: the tools it finds can be called from your next round on."
)
TOOL_SEARCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search_tools",
        "description": "Find and load more tools for a task; the tools found can be called from the next round.",
        "parameters": {
            "type": "object",
            "properties": {"task": {"type": "string", "description": "what the tools should do"}},
            "required": ["task"],
        },
    },
}


def _described(function: dict[str, Any]) -> dict[str, Any]:
    return {**function, "description": function["description"].format(sources=searched_sources_phrase())}


def _with_sources(parameters: dict[str, Any]) -> dict[str, Any]:
    properties = parameters.get("properties", {})
    if "source" not in properties:
        return parameters
    source = {**properties["source"], "enum": list(document_sources())}
    return {**parameters, "properties": {**properties, "source": source}}


_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_documents",
            "description": "Search the documents the user may read ({sources}); returns numbered documents.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what to search for"},
                    "source": {"type": "string", "description": "only this source"},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": 10, "description": "documents (default 5)"},
                },
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_document",
            "description": "One whole document the user may read, by the document_id a search returned.",
            "parameters": {
                "type": "object",
                "properties": {"document_id": {"type": "string"}},
                "required": ["document_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_containers",
            "description": (
                "The sources, channels and projects the user may search, with document counts (sources). nodes: the "
                "user's tree from root_path (a source, channel/project, document or Confluence page path; every "
                "source when omitted) down max_depth levels (1: sources and containers, 2: their documents, deeper: "
                "Confluence child pages), depth first, a page of limit nodes from offset (next_offset: the next page)."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "prefix": {"type": "string", "description": "only containers whose path begins so"},
                    "root_path": {"type": "string", "description": "the node to list from, e.g. slack/#eng"},
                    "max_depth": {"type": "integer", "minimum": 0, "maximum": MAX_TREE_DEPTH},
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": AGENT_TREE_LIMIT},
                },
            },
        },
    },
]


@dataclass
class AgentTools:
    """The caller's own tools: ``search(query, source, top_k)``, ``document(id)`` (None: not found or not
    readable) and ``tree(prefix, view)`` (the reader's deep tree, retrieval/tree_view.py), each already bound to the
    reader."""

    search: Callable[[str, str | None, int], list[SearchResult]]
    document: Callable[[str], dict[str, Any] | None]
    # (prefix, view) -> {"sources": the containers under prefix, and the view's page: root_path, nodes, ...}
    tree: Callable[[str | None, TreeView], dict[str, Any]]
    # Tool search (RAG_AGENT_TOOL_SEARCH): a task -> the names of the indexed tools for it, best first; None: every
    # tool of the agent is offered from the start.
    find_tools: Callable[[str], list[str]] | None = None


@dataclass
class ToolCall:
    """One call the model made: the tool, its arguments, the document ids it returned, or the error it got."""

    name: str
    arguments: dict[str, Any]
    document_ids: list[str] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "document_ids": self.document_ids,
                "error": self.error}  # fmt: skip


@dataclass
class AgentAnswer:
    """The answer, every tool call made in order, and the seconds the whole exchange took."""

    question: str
    answer: Answer
    tool_calls: list[ToolCall]
    seconds: float
    results: list[SearchResult] = field(default_factory=list)
    # The model failed before any tool ran and the question was searched as the plain answer route does.
    fell_back: bool = False
    # With tool search: the agent's tools loaded at the end (its critical set and those tool search found).
    active_tools: list[str] | None = None


class _Documents:
    """The documents the tools returned, numbered from 1 in the order they first appear."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.by_id: dict[str, ContextDocument] = {}
        self.results: list[SearchResult] = []

    def add(self, document_id: str, source: str, title: str, url: str | None, authors: Sequence[str], text: str) -> int:
        found = self.by_id.get(document_id)
        if found is None:
            found = ContextDocument(
                number=len(self.by_id) + 1,
                document_id=document_id,
                source=source,
                title=title,
                url=url,
                authors=tuple(one_line(a) for a in authors),
                text=capped(text, self.max_chars),
            )
            self.by_id[document_id] = found
        return found.number

    def rendered(self, number: int) -> dict[str, Any]:
        doc = next(d for d in self.by_id.values() if d.number == number)
        # The body cannot forge another document's header or the tool protocol: it is one JSON string value.
        return {"number": doc.number, "document_id": doc.document_id, "source": doc.source, "title": doc.title,
                "url": doc.url, "authors": list(doc.authors), "text": doc.text}  # fmt: skip


def _arguments(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        raise ValueError("the arguments are not JSON") from None
    if not isinstance(value, dict):
        raise ValueError("the arguments are not a JSON object")
    return value


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "arguments"
    return f"{where}: {first['msg']}"


def own_tool_names() -> tuple[str, ...]:
    return tuple(tool["function"]["name"] for tool in _TOOLS)


def activate_found(active: list[str], found: Sequence[str]) -> list[str]:
    """Add the agent's own tools among ``found`` (tool search's names) to ``active``; the ones added."""
    own = own_tool_names()
    added = [name for name in dict.fromkeys(found) if name in own and name not in active]
    active.extend(added)
    return added


def _search_tools(arguments: dict[str, Any], tools: AgentTools, active: list[str]) -> dict[str, Any]:
    task = arguments.get("task")
    if not isinstance(task, str) or len(task.strip()) < 2:
        raise ValueError("task: a text of at least 2 characters is required")
    assert tools.find_tools is not None
    found = tools.find_tools(task)
    added = activate_found(active, found)
    usable = [name for name in found if name in own_tool_names()]
    left_out = "tools found that are not yours to call are left out" if len(usable) < len(found) else None
    return {"found": usable, "activated": added, "active_tools": list(active), "note": left_out}


def _run_tool(
    name: str, arguments: dict[str, Any], tools: AgentTools, documents: _Documents, active: list[str] | None = None
) -> tuple[Any, ToolCall]:
    call = ToolCall(name, arguments)
    if active is not None:
        if name == "search_tools":
            return _search_tools(arguments, tools, active), call
        if name in own_tool_names() and name not in active:
            raise ValueError(f"{name} is not loaded: call search_tools with what you need it for")
    if name == "search_documents":
        query = arguments.get("query")
        if not isinstance(query, str) or len(query.strip()) < 2:
            raise ValueError("query: a text of at least 2 characters is required")
        source = arguments.get("source")
        if source is not None and source not in document_sources():
            raise ValueError(f"source: one of {', '.join(document_sources())}")
        top_k = arguments.get("top_k", 5)
        if not isinstance(top_k, int) or not 1 <= top_k <= 10:
            raise ValueError("top_k: a whole number from 1 to 10")
        found = tools.search(query, source, top_k)
        numbers = [documents.add(r.document_id, r.source, r.title, r.url, r.authors, r.parent_text or r.child_text)
                   for r in found]  # fmt: skip
        documents.results.extend(r for r in found if r.document_id not in {x.document_id for x in documents.results})
        call.document_ids = [r.document_id for r in found]
        return {"documents": [documents.rendered(n) for n in numbers]}, call
    if name == "get_document":
        document_id = arguments.get("document_id")
        if not isinstance(document_id, str) or not document_id.strip():
            raise ValueError("document_id: a document id from search_documents is required")
        found_doc = tools.document(document_id)
        if found_doc is None:  # missing and not readable read the same
            raise ValueError(f"document {document_id!r} not found")
        number = documents.add(
            document_id,
            str(found_doc.get("source", "")),
            str(found_doc.get("title", "")),
            found_doc.get("url"),
            found_doc.get("authors") or [],
            str(found_doc.get("text", "")),
        )
        call.document_ids = [document_id]
        return {"document": documents.rendered(number)}, call
    if name == "list_containers":
        prefix = arguments.get("prefix")
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError("prefix: a text")
        try:  # the reader's tree's own bounds (a negative depth, a page too large: refused, told to the model)
            view = TreeView.model_validate(
                {"limit": DEFAULT_AGENT_TREE_LIMIT, **{k: v for k, v in arguments.items() if k != "prefix"}}
            )
        except ValidationError as exc:
            raise ValueError(_first_error(exc)) from None
        if view.limit > AGENT_TREE_LIMIT:
            raise ValueError(f"limit: at most {AGENT_TREE_LIMIT} nodes a call")
        return tools.tree(prefix, view), call
    raise ValueError(f"no tool named {name!r}")


def _starting_tools(tools: AgentTools, question: str) -> list[str] | None:
    """With tool search: the critical set and the agent's tools tool search finds for the question (the critical set
    alone where the search fails: the model can still search for more); None: every tool, as without it."""
    if tools.find_tools is None:
        return None
    active = list(AGENT_CRITICAL_TOOLS)
    try:
        activate_found(active, tools.find_tools(question))
    except Exception:  # an index lent to a writer, no tools indexed: the critical set stands
        log.warning("tool search for the agent's first tools failed", exc_info=True)
    return active


FALLBACK_NOTICE = "the question was searched as a plain answer searches it, since the model failed before any tool ran"


def run_agent(
    model: AnswerModel,
    tools: AgentTools,
    turns: Sequence[tuple[str, str]],
    max_iterations: int = 4,
    max_chars: int = 1500,
    *,
    fallback: Callable[[str], list[SearchResult]] | None = None,
    fallback_documents: int = DEFAULT_CONTEXT_DOCUMENTS,
) -> AgentAnswer:
    """The conversation ``turns`` ((role, text), oldest first) answered by ``model`` using ``tools`` as it decides,
    at most ``max_iterations`` rounds of tool calls; then an answer without tools. When the model fails before any
    tool ran, ``fallback`` (the plain answer's search) searches the question and its top ``fallback_documents``
    come back unanswered, with the reason."""
    if max_iterations < 1:
        raise ValueError("max_iterations: at least 1")
    started = time.perf_counter()
    question = next((text for role, text in reversed(turns) if role == "user"), "")
    if not question:
        raise ValueError("the conversation has no user message")
    active = _starting_tools(tools, question)
    prompt = AGENT_PROMPT.format(sources=searched_sources_phrase()) + (TOOL_SEARCH_PROMPT if active is not None else "")
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt}]
    messages += [{"role": role, "content": text} for role, text in turns if role in ("user", "assistant")]
    usage, documents, calls = Usage(), _Documents(max_chars), []
    notices: list[str] = []
    reasoning: list[str | None] = []
    text = ""
    try:
        for iteration in range(max_iterations + 1):
            last = iteration == max_iterations
            message = model.reply(messages, usage, tools=agent_tools(active), tool_choice="none" if last else "auto")
            reasoning.append(reasoning_of(message))
            requested = list(message.tool_calls or []) if not last else []
            if not requested:
                text = message.content or ""
                if last and iteration > 0:
                    notices.append(f"the model used all {max_iterations} tool rounds (max_iterations)")
                break
            messages.append({"role": "assistant", "content": message.content,
                             "tool_calls": [c.model_dump() for c in requested]})  # fmt: skip
            for requested_call in requested:
                name = requested_call.function.name
                try:
                    arguments = _arguments(requested_call.function.arguments)
                    result, call = _run_tool(name, arguments, tools, documents, active)
                except Exception as exc:  # reported to the model, which may try otherwise; never a failed answer
                    call = ToolCall(name, {}, error=str(exc) if isinstance(exc, ValueError) else type(exc).__name__)
                    result = {"error": call.error}
                calls.append(call)
                messages.append({"role": "tool", "tool_call_id": requested_call.id,
                                 "content": json.dumps(result, ensure_ascii=False)})  # fmt: skip
    except Exception as exc:  # the model's client error or timeout: what the tools found so far, and why
        reason = model_failure(exc)
        if not calls and fallback is not None:
            results = fallback(question)
            context = build_context(results, fallback_documents, max_chars)
            answer = unanswered(model.model, context, reason, usage)
            answer.notices = [*notices, FALLBACK_NOTICE]
            answer.reasoning = joined_reasoning(reasoning)
            return AgentAnswer(question, answer, calls, time.perf_counter() - started, results, fell_back=True,
                               active_tools=active)  # fmt: skip
        context = sorted(documents.by_id.values(), key=lambda d: d.number)
        answer = unanswered(model.model, context, reason, usage)
        answer.notices = notices
        answer.reasoning = joined_reasoning(reasoning)
        seconds = time.perf_counter() - started
        return AgentAnswer(question, answer, calls, seconds, documents.results, active_tools=active)
    if not calls:
        notices.append("the model answered without searching: no document backs this answer")
    context = sorted(documents.by_id.values(), key=lambda d: d.number)
    citations = parse_citations(text, [d.number for d in context])
    answer = Answer(text=text, model=model.model, context=context, sources=[context[n - 1] for n in citations.valid],
                    invalid_citations=citations.invalid, usage=usage, notices=notices,
                    reasoning=joined_reasoning(reasoning))  # fmt: skip
    return AgentAnswer(question, answer, calls, time.perf_counter() - started, documents.results,
                       active_tools=active)  # fmt: skip
