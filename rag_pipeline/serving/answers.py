"""The answer use cases — a plain answer (condense, search, answer: :func:`~rag_pipeline.answers.ask.ask`) and the
agent's (the model calls the reader's tools: :func:`~rag_pipeline.answers.agent.run_agent`) — over any
:class:`Searcher`: the service's shared index (HTTP chat, ``/v1/search`` with ``answer``) or an index opened per
call (the CLI's ``ask``). The tools and the searches an answer runs are set up here once, so ``ask`` and the chat
endpoint search alike: same request model, same defaults, same reader.

An agent's answer (:func:`agent_answer`) is given the plain answer's search as its fallback, so a model that fails
before its first tool call still returns the documents a plain answer would have been written from; a request may
ask for fewer rounds than the setting allows (:func:`agent_rounds`), never more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from rag_pipeline.answers.agent import AgentAnswer, AgentTools, run_agent
from rag_pipeline.answers.ask import ContextLimits, ask
from rag_pipeline.answers.generate import Answer, AnswerModel
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.results import Mode, SearchResponse, SearchResult
from rag_pipeline.retrieval.rewrite import PlanOutcome
from rag_pipeline.retrieval.tree import ContainerNode, tree_json
from rag_pipeline.retrieval.tree_view import TreePage, TreeView
from rag_pipeline.serving.documents import ServedDocument
from rag_pipeline.serving.schemas import MAX_QUERY_CHARS, MAX_TOP_K, SearchRequest
from rag_pipeline.serving.search import ServedSearch

# The longest document id a model's tool call may ask for (ids are far shorter; a model may write anything).
MAX_DOCUMENT_ID_CHARS = 1000


class Searcher(Protocol):
    """Where the use cases run: :class:`~rag_pipeline.serving.service.SearchService` (the service's shared index)
    or :class:`~rag_pipeline.serving.one_shot.OneShotIndex` (an index opened per call)."""

    def search(self, request: SearchRequest, reader: Principal, plan: PlanOutcome | None = None) -> ServedSearch: ...

    def get_document(self, document_id: str, reader: Principal) -> ServedDocument | None: ...

    def tree(self, reader: Principal, prefix: str | None = None) -> list[ContainerNode]: ...

    def tree_view(
        self, reader: Principal, prefix: str | None, view: TreeView
    ) -> tuple[list[ContainerNode], TreePage]: ...


def _unobserved(served: ServedSearch) -> SearchResponse:
    return served.response


Observe = Callable[[ServedSearch], SearchResponse]
Planner = Callable[[str], PlanOutcome]


def question_search(
    searcher: Searcher,
    reader: Principal,
    mode: Mode,
    top_k: int,
    *,
    plan: Planner | None = None,
    observe: Observe = _unobserved,
) -> Callable[[str], list[SearchResult]]:
    """The search a plain answer runs for its (condensed) question: ``mode``, ``top_k`` documents, planned by the
    rewrite model first when ``plan`` is given; ``observe`` sees every search (the service's metrics)."""

    def search(question: str) -> list[SearchResult]:
        request = SearchRequest(query=question[:MAX_QUERY_CHARS], mode=mode, top_k=min(top_k, MAX_TOP_K))
        outcome = plan(request.query) if plan is not None else None
        return observe(searcher.search(request, reader, outcome)).results

    return search


def reader_tools(
    searcher: Searcher,
    reader: Principal,
    mode: Mode = "routed",
    *,
    observe: Observe = _unobserved,
    find_tools: Callable[[str], list[str]] | None = None,
) -> AgentTools:
    """The reader's own tools for the agent: the model's arguments choose a query, a source, a document, a path,
    never a reader. ``find_tools``: the agent picks its tools by tool search (RAG_AGENT_TOOL_SEARCH,
    :func:`~rag_pipeline.serving.tool_selection.agent_tool_finder`)."""

    def search(query: str, source: str | None, top_k: int) -> list[SearchResult]:
        request = SearchRequest(
            query=query[:MAX_QUERY_CHARS], mode=mode, top_k=top_k, source=[source] if source else None
        )
        return observe(searcher.search(request, reader)).results

    def document(document_id: str) -> dict[str, Any] | None:
        found = searcher.get_document(document_id[:MAX_DOCUMENT_ID_CHARS], reader)
        return None if found is None else found.to_dict()

    def tree(prefix: str | None, view: TreeView) -> dict[str, Any]:
        # The same tree use case as GET /v1/tree and MCP's list_containers, as the reader.
        nodes, page = searcher.tree_view(reader, prefix, view)
        return {"sources": tree_json(nodes), **page.to_dict()}

    return AgentTools(search, document, tree, find_tools)


def answered_question(
    model: AnswerModel, searcher: Searcher, reader: Principal, question: str, limits: ContextLimits
) -> dict[str, Any]:
    """One question answered from what ``reader`` may read, as ``POST /v1/chat/completions`` answers it without the
    agent (the reranked search of :func:`question_search`, then :func:`~rag_pipeline.answers.ask.ask`): the answer
    with its numbered citations, the cited ``sources``, and why where the model failed (the documents found still
    come back as the sources). The MCP ``ask`` tool returns it."""
    asked = ask(model, question_search(searcher, reader, "reranked", limits.documents), [("user", question)], limits)
    answer = asked.answer
    return {
        "question": asked.question,
        "answer": None if answer.failure else answer.text,
        "answer_error": answer.failure,
        "sources": answer.sources_json(),
        "notices": answer.notices,
        "invalid_citations": list(answer.invalid_citations),
        "model": answer.model,
    }


class RoundsRefused(ValueError):
    """A request's ``max_iterations`` this deployment will not run: over the bound, or the agent is off."""

    field = "max_iterations"


def agent_rounds(requested: int | None, bound: int | None) -> int | None:
    """The tool rounds an answer may take: the request's ``max_iterations`` where it gives one (1 up to ``bound``,
    RAG_AGENT_MAX_ITERATIONS), else the bound; None when the agent is off (``bound`` None) and none was asked."""
    if requested is None:
        return bound
    if bound is None:
        raise RoundsRefused("max_iterations: the answers here search once (RAG_AGENT is off); leave it out")
    if not 1 <= requested <= bound:
        raise RoundsRefused(f"max_iterations: a whole number from 1 to {bound} (RAG_AGENT_MAX_ITERATIONS)")
    return requested


def agent_answer(
    model: AnswerModel,
    tools: AgentTools,
    turns: list[tuple[str, str]],
    rounds: int,
    limits: ContextLimits,
    fallback: Callable[[str], list[SearchResult]],
) -> AgentAnswer:
    """The agent's answer to ``turns`` in at most ``rounds`` tool rounds; a model that fails before any tool ran
    gets the plain answer's search (``fallback``, :func:`question_search`) and its top documents as the sources."""
    return run_agent(model, tools, turns, rounds, limits.max_chars, fallback=fallback,
                     fallback_documents=limits.documents)  # fmt: skip


def answer_text(answer: Answer) -> dict[str, Any]:
    """An answer's words as every face reports them: the text (None when the model failed, with the failure beside
    it), the notices and the model's reasoning."""
    return {
        "answer": None if answer.failure else answer.text,
        "answer_error": answer.failure,
        "notices": answer.notices,
        "reasoning": answer.reasoning,
    }


def answer_fields(answer: Answer) -> dict[str, Any]:
    """What an answer adds to a search's body (``/v1/search`` with ``"answer": true``)."""
    return {
        **answer_text(answer),
        "sources": answer.sources_json(),
        "answer_metadata": {
            "model": answer.model,
            "context_documents": len(answer.context),
            "invalid_citations": list(answer.invalid_citations),
            **answer.usage.as_dict(),
        },
    }
