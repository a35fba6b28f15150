"""Where the MCP tools' calls run: :class:`ToolBackend`, answered by this process's search service
(:class:`LocalTools`) or by a running service over HTTP (:mod:`rag_pipeline.mcp.remote`)."""

from __future__ import annotations

from typing import Any, Protocol

from rag_pipeline.answers.ask import DEFAULT_LIMITS, ContextLimits
from rag_pipeline.answers.generate import AnswerModel
from rag_pipeline.retrieval.tree import tree_json
from rag_pipeline.retrieval.tree_view import TreeView
from rag_pipeline.serving.access import AccessQueries
from rag_pipeline.serving.active_tools import CallerKey
from rag_pipeline.serving.answers import answered_question
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.schemas import FeedbackRequest, SearchRequest, ToolOutcomeRequest, ToolSearchRequest
from rag_pipeline.serving.service import SearchService
from rag_pipeline.serving.tool_selection import ActiveAction, change_active_tools, find_tools

# A tool result lands in a model's context window: a passage, not the whole chunk.
SNIPPET_CHARS = 1200


class ToolBackend(Protocol):
    """Where the tools' calls run: this process's :class:`SearchService` (:class:`LocalTools`), or a running
    ``rag-pipeline serve`` of the same folder over HTTP (:class:`~rag_pipeline.mcp.remote.RemoteTools`, for the
    stdio server)."""

    def search(self, request: SearchRequest, reader: Reader) -> dict[str, Any]: ...

    def document(self, document_id: str, reader: Reader) -> dict[str, Any] | None: ...

    def whois(self, reader: Reader, person: str | None) -> dict[str, Any]: ...

    def tree(self, reader: Reader, prefix: str | None) -> list[dict[str, Any]]: ...

    def tree_view(self, reader: Reader, prefix: str | None, view: TreeView) -> dict[str, Any]:
        """``GET /v1/tree``'s body less its reader: ``prefix`` and ``sources`` (the containers under the prefix),
        and the page of the deeper tree ``view`` asks for."""
        ...

    def explain(self, document_id: str, reader: Reader, person: str | None) -> dict[str, Any]: ...

    def search_tools(self, request: ToolSearchRequest, reader: Reader, session: str = "") -> dict[str, Any]:
        """The tools for a task, those active in the caller's (``session``'s) set left out
        (:func:`~rag_pipeline.serving.tool_selection.find_tools`)."""
        ...

    def active_tools(self, action: ActiveAction, names: list[str], reader: Reader, session: str = "") -> dict[str, Any]:
        """The caller's active tool set after ``action``
        (:func:`~rag_pipeline.serving.tool_selection.change_active_tools`);
        :class:`~rag_pipeline.serving.active_tools.ActiveSetRefused` for an unknown tool or over the bound."""
        ...

    def tool_outcome(self, name: str, request: ToolOutcomeRequest, reader: Reader) -> dict[str, Any] | None:
        """The tool's record after counting the call; None when no indexed tool has that name."""
        ...

    def ask(self, question: str, reader: Reader) -> dict[str, Any]:
        """The question answered with citations from what ``reader`` may read
        (:func:`~rag_pipeline.serving.answers.answered_question`); :class:`AnswersOff` where no answer model is
        configured."""
        ...

    def feedback(self, request: FeedbackRequest, reader: Reader) -> dict[str, Any] | None:
        """The judgement as kept; None when the document is missing or the reader may not read it;
        :class:`~rag_pipeline.serving.feedback.FeedbackDisabled` when feedback is off."""
        ...


def tool_result(result: dict[str, Any]) -> dict[str, Any]:
    """One search result as a tool returns it (``result`` as the HTTP API writes it)."""
    return {
        "document_id": result["document_id"],
        "title": result["title"],
        "url": result["url"],
        "source": result["source"],
        "container": result["container"],
        "updated": result["updated"],
        "authors": result["authors"],
        "score": round(float(result["score"]), 6),
        "passage": (result.get("child_text") or "")[:SNIPPET_CHARS],
    }


def tool_search_result(body: dict[str, Any]) -> dict[str, Any]:
    """A search's body (the use case's, :func:`~rag_pipeline.serving.search.search_body`) as a tool returns it."""
    return {
        "mode": body["mode"],
        "warnings": body.get("warnings", []),
        "results": [tool_result(r) for r in body["results"]],
    }


class AnswersOff(Exception):
    """``ask`` where no answer model is configured (RAG_ANSWER_MODEL)."""


class LocalTools:
    """The tools over this process's :class:`SearchService`, ``whois``/``explain`` over ``access``, and ``ask`` with
    ``answer_model`` (None: answers are off)."""

    def __init__(
        self,
        service: SearchService,
        access: AccessQueries,
        answer_model: AnswerModel | None = None,
        answer_limits: ContextLimits = DEFAULT_LIMITS,
    ) -> None:
        self.service = service
        self.access = access
        self.answer_model = answer_model
        self.answer_limits = answer_limits

    def ask(self, question: str, reader: Reader) -> dict[str, Any]:
        if self.answer_model is None:
            raise AnswersOff("answers are off: set RAG_ANSWER_MODEL (and OPENAI_API_KEY) where the tools run")
        return answered_question(self.answer_model, self.service, reader.principal, question, self.answer_limits)

    def search(self, request: SearchRequest, reader: Reader) -> dict[str, Any]:
        served = self.service.search(request, reader.principal)
        return tool_search_result(
            {
                "mode": served.response.mode,
                "warnings": served.response.warnings,
                "results": [r.to_dict() for r in served.response.results],
            }
        )

    def document(self, document_id: str, reader: Reader) -> dict[str, Any] | None:
        found = self.service.get_document(document_id, reader.principal)
        return None if found is None else found.to_dict()

    def whois(self, reader: Reader, person: str | None) -> dict[str, Any]:
        return self.access.whois(reader, person)

    def tree(self, reader: Reader, prefix: str | None) -> list[dict[str, Any]]:
        return tree_json(self.service.tree(reader.principal, prefix))

    def tree_view(self, reader: Reader, prefix: str | None, view: TreeView) -> dict[str, Any]:
        nodes, page = self.service.tree_view(reader.principal, prefix, view)
        return {"prefix": prefix, "sources": tree_json(nodes), **page.to_dict()}

    def explain(self, document_id: str, reader: Reader, person: str | None) -> dict[str, Any]:
        return self.access.explain(document_id, reader, person)

    def search_tools(self, request: ToolSearchRequest, reader: Reader, session: str = "") -> dict[str, Any]:
        caller = CallerKey.of(reader.principal, session)
        return find_tools(self.service, self.service.active_tools, caller, request, reader.principal)

    def active_tools(self, action: ActiveAction, names: list[str], reader: Reader, session: str = "") -> dict[str, Any]:
        caller = CallerKey.of(reader.principal, session)
        return change_active_tools(self.service, self.service.active_tools, caller, action, names)

    def tool_outcome(self, name: str, request: ToolOutcomeRequest, reader: Reader) -> dict[str, Any] | None:
        try:
            return self.service.record_tool_outcome(name, request)
        except KeyError:
            return None

    def feedback(self, request: FeedbackRequest, reader: Reader) -> dict[str, Any] | None:
        return self.service.record_feedback(request, reader.principal)
