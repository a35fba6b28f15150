"""Tool search with each caller's active set (issue 67): the use case every face calls — ``POST /v1/tools/search``
and ``/v1/tools/active*``, the MCP ``search_tools`` / ``activate_tools`` / ``deactivate_tools`` /
``get_active_tools`` / ``reset_active_tools``, and ``rag-pipeline tools`` — so they differ only in how they read
the arguments and the caller.

:func:`find_tools` searches as the caller, leaving out the tools its active set holds besides the critical
ones, which every response lists (unless the request asks to keep them all), shapes each definition as the request
asks (``include_full_params``, ``max_description_length``) and counts the prompt tokens of what it returns.
:func:`change_active_tools` reads or changes the caller's set.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Literal, Protocol

from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.tool_outcomes import ToolOutcomes
from rag_pipeline.retrieval.tool_search import ToolRoster, ToolSearch, ToolSearchResponse, ToolView
from rag_pipeline.serving.active_tools import ActiveToolSets, CallerKey
from rag_pipeline.serving.one_shot import OneShotIndex
from rag_pipeline.serving.schemas import MAX_QUERY_CHARS, ToolSearchRequest

ActiveAction = Literal["get", "activate", "deactivate", "reset"]


class ToolIndex(Protocol):
    """What tool search runs on: the service (:class:`~rag_pipeline.serving.service.SearchService`) or the command
    line's one-shot index (:class:`OneShotTools`)."""

    def search_tools(
        self, request: ToolSearchRequest, reader: Principal, exclude: Collection[str] = ()
    ) -> ToolSearchResponse: ...

    def tool_roster(self) -> ToolRoster: ...


class OneShotTools:
    """The command line's index as a :class:`ToolIndex` (usage and success from the data folder's outcomes)."""

    def __init__(self, index: OneShotIndex, tool_search: ToolSearch, outcomes: ToolOutcomes) -> None:
        self.index = index
        self.tool_search = tool_search
        self.outcomes = outcomes

    def search_tools(
        self, request: ToolSearchRequest, reader: Principal, exclude: Collection[str] = ()
    ) -> ToolSearchResponse:
        return self.index.search_tools(self.tool_search, request, reader, self.outcomes, exclude)

    def tool_roster(self) -> ToolRoster:
        return self.index.tool_roster(self.tool_search)


def view_of(request: ToolSearchRequest) -> ToolView:
    """How much of each definition the request wants back."""
    return ToolView(request.include_full_params, request.max_description_length)


def find_tools(
    tools: ToolIndex, sets: ActiveToolSets, caller: CallerKey, request: ToolSearchRequest, reader: Principal
) -> dict[str, Any]:
    """The tools for the request's task as the faces return them: the search's body (retrieval/tool_search.py) in
    the request's view, the tools the caller's active set left out (``excluded_active``) and that set."""
    roster = tools.tool_roster()
    active = sets.active(caller, roster.critical)
    # The critical tools stay in every response (the design's "always loaded"); the others active are left out.
    exclude = [name for name in active if name not in roster.critical] if request.exclude_active else []
    found = tools.search_tools(request, reader, exclude)
    body = found.to_dict(view_of(request))
    body["active_tools"] = active
    body["excluded_active"] = [name for name in exclude if name in roster.names]
    return body


def agent_tool_finder(tools: ToolIndex, reader: Principal) -> Callable[[str], list[str]]:
    """The answer agent's tool search (RAG_AGENT_TOOL_SEARCH, answers/agent.py): a task -> the names of the tools
    found for it, as ``reader``, the critical ones included."""

    def find(task: str) -> list[str]:
        request = ToolSearchRequest(query=task.strip()[:MAX_QUERY_CHARS] or "?", include_full_params=False)
        return [hit.entry.name for hit in tools.search_tools(request, reader).tools]

    return find


def change_active_tools(
    tools: ToolIndex, sets: ActiveToolSets, caller: CallerKey, action: ActiveAction, names: Sequence[str] = ()
) -> dict[str, Any]:
    """The caller's active set after ``action``: ``get`` reads it, ``activate`` adds indexed tools (refused whole
    with :class:`~rag_pipeline.serving.active_tools.ActiveSetRefused` for an unknown one or over the bound),
    ``deactivate`` removes tools, ``reset`` returns it to the critical set."""
    roster = tools.tool_roster()
    if action == "activate":
        active = sets.activate(caller, names, roster.names, roster.critical)
    elif action == "deactivate":
        active = sets.deactivate(caller, names, roster.critical)
    elif action == "reset":
        active = sets.reset(caller, roster.critical)
    else:
        active = sets.active(caller, roster.critical)
    return {
        "active_tools": active,
        "critical": list(roster.critical),
        "max_tools": sets.limits.max_tools,
        "session": caller.session or None,
    }
