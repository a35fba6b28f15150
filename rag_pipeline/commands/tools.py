"""``rag-pipeline tools QUERY``: tool search from the command line (the service's ``POST /v1/tools/search`` and
the MCP ``search_tools``), ``--outcome NAME=ok|failed`` to record whether a call worked, and the caller's active
tool set (``--activate``, ``--deactivate``, ``--active``, ``--reset-active``), kept in the data folder per
``--user`` and ``--session`` so that a later search leaves the active tools out (serving/tool_selection.py)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.composition import dense_encoder_of
from rag_pipeline.settings import Settings

if TYPE_CHECKING:
    from rag_pipeline.retrieval.principal import Principal
    from rag_pipeline.serving.one_shot import OneShotIndex

# The active sets the command line keeps between runs (the service keeps its own in memory).
ACTIVE_SETS_FILE = "tool_active_sets.json"
CLI_READER = "rag-pipeline-cli"


def _names(raw: list[str]) -> list[str]:
    return [name.strip() for value in raw for name in value.split(",") if name.strip()]


def add_parser(sub: argparse._SubParsersAction) -> None:
    tools = sub.add_parser(
        "tools",
        help="find the few tools a task needs among the indexed tool definitions",
        description="Searches the tools indexed from RAG_TOOLS_CATALOG and RAG_TOOLS_MCP_SERVERS (`rag-pipeline "
        "index --tools-catalog FILE --source tools`) with the multi-signal score: 0.5 semantic + 0.3 usage + 0.2 "
        "success (RAG_TOOL_SEARCH_WEIGHTS), usage and success read from the data folder's tool_outcomes.sqlite, "
        "the critical tools (RAG_TOOLS_CRITICAL) always listed, and the prompt tokens the tools cost against "
        "loading every one. Tools in the caller's active set (--activate; per --user and --session, kept in the "
        "data folder's tool_active_sets.json) are left out. --outcome records a call instead. Exit 0; 2 on a bad "
        "argument, an unknown tool or a full active set.",
    )
    tools.add_argument("query", nargs="?", default=None, help="the task, in words")
    tools.add_argument("--top-k", type=int, default=None, help="tools besides the critical ones (default 5)")
    tools.add_argument("--mode", choices=("multi-signal", "vector", "bm25", "hybrid"), default="multi-signal")
    tools.add_argument("--category", action="append", default=[], help="only tools with this tag (repeatable)")
    tools.add_argument("--min-similarity", type=float, default=None, help="drop tools less similar (0-1)")
    tools.add_argument("--no-params", action="store_true", help="leave the parameter schemas out (fewer tokens)")
    tools.add_argument("--max-description-length", type=int, default=None, help="cut descriptions to N characters")
    tools.add_argument("--keep-active", action="store_true", help="also return tools already in the active set")
    tools.add_argument("--outcome", default=None, metavar="NAME=ok|failed", help="record one call of tool NAME")
    tools.add_argument("--activate", action="append", default=[], metavar="NAME[,NAME]", help="add to the active set")
    tools.add_argument("--deactivate", action="append", default=[], metavar="NAME[,NAME]", help="remove from it")
    tools.add_argument("--active", action="store_true", help="print the active set")
    tools.add_argument("--reset-active", action="store_true", help="the active set back to the critical tools")
    tools.add_argument("--user", default=CLI_READER, help="whose active set (default %(default)s)")
    tools.add_argument("--session", default="", help="the session within the user's active sets")
    add_data_dir(tools)
    tools.add_argument("--json", action="store_true", help="print JSON")
    tools.set_defaults(func=run, reads_data_folder=True)


def _request(args: argparse.Namespace) -> Any:
    from rag_pipeline.serving.refusal import first_invalid
    from rag_pipeline.serving.schemas import ToolSearchRequest

    arguments = {"query": args.query, "mode": args.mode, "top_k": args.top_k, "categories": args.category or None,
                 "min_similarity": args.min_similarity, "include_full_params": not args.no_params,
                 "max_description_length": args.max_description_length, "exclude_active": not args.keep_active}
    try:
        return ToolSearchRequest.model_validate(arguments)
    except ValidationError as exc:
        field, message = first_invalid(exc)
        raise CommandError(f"--{field.split('.')[0].replace('_', '-')}: {message}") from None


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.composition import one_shot_index
    from rag_pipeline.retrieval.principal import Principal
    from rag_pipeline.retrieval.tool_outcomes import ToolOutcomes
    from rag_pipeline.retrieval.tool_search import ToolSearch, outcome_record, tool_search_config, tool_search_settings
    from rag_pipeline.serving.active_tools import ActiveSetLimits, ActiveSetRefused, CallerKey, load_sets, save_sets
    from rag_pipeline.serving.tool_selection import OneShotTools, change_active_tools, find_tools
    from rag_pipeline.sources.registry import tool_catalog_source

    activate, deactivate = _names(args.activate), _names(args.deactivate)
    changing = bool(activate or deactivate or args.active or args.reset_active)
    if sum((args.query is not None, args.outcome is not None, changing)) != 1:
        raise CommandError("give a QUERY to search, --outcome NAME=ok|failed to record a call, or --activate/"
                           "--deactivate/--active/--reset-active for the active set (one of them)")  # fmt: skip
    if args.top_k is not None and args.top_k < 1:
        raise CommandError(f"--top-k must be at least 1, got {args.top_k}")
    request = _request(args) if args.query is not None else None
    section = tool_search_settings(settings.source(tool_catalog_source()))
    outcomes = ToolOutcomes(settings.paths.tool_outcomes)
    searching = request is not None and args.mode != "bm25"
    index = one_shot_index(settings, dense=(lambda: dense_encoder_of(settings)) if searching else None)
    tools = OneShotTools(index, ToolSearch(tool_search_config(section)), outcomes)
    sets_path = settings.paths.tool_outcomes.parent / ACTIVE_SETS_FILE
    sets = load_sets(sets_path, ActiveSetLimits.of(section))
    caller = CallerKey(args.user, args.session)
    try:
        if args.outcome is not None:
            name, _, result = args.outcome.rpartition("=")
            if not name or result not in ("ok", "failed"):
                raise CommandError(f"--outcome must be NAME=ok or NAME=failed, got {args.outcome!r}")
            if name not in index.tool_names():
                raise CommandError(f"--outcome: no indexed tool is named {name!r}")
            stats = outcomes.record(name, result == "ok")
            recorded = outcome_record(name, stats)
            print(json.dumps(recorded) if args.json else f"{name}: {stats.successes} of {stats.calls} calls worked")
            return 0
        if request is None:
            try:
                if args.reset_active:
                    changed = change_active_tools(tools, sets, caller, "reset")
                if deactivate:
                    changed = change_active_tools(tools, sets, caller, "deactivate", deactivate)
                if activate:
                    changed = change_active_tools(tools, sets, caller, "activate", activate)
                if args.active and not (args.reset_active or deactivate or activate):
                    changed = change_active_tools(tools, sets, caller, "get")
            except ActiveSetRefused as exc:
                raise CommandError(f"--activate: {str(exc).removeprefix('names: ')}") from None
            save_sets(sets_path, sets)
            listed = ", ".join(changed["active_tools"]) or "none"
            print(json.dumps(changed) if args.json else f"active tools: {listed}")
            return 0
        # Tools are public: any reader sees the same catalog; --user only says whose active set is read.
        payload = find_tools(tools, sets, caller, request, Principal(user_id=args.user))
        save_sets(sets_path, sets)
    finally:
        outcomes.close()
    if args.json:
        print(json.dumps(payload, indent=2, ensure_ascii=False))
        return 0
    _print(payload)
    return 0


def _print(payload: dict[str, Any]) -> None:
    for warning in payload["warnings"]:
        print(f"warning: {warning}")
    for rank, tool in enumerate(payload["tools"], start=1):
        mark = " (critical)" if tool["critical"] else ""
        signals = tool["signals"]
        print(f"{rank}. {tool['name']}{mark}  score {tool['score']:.3f} = semantic {signals['semantic']:.2f}, "
              f"usage {signals['usage']:.2f}, success {signals['success']:.2f}")  # fmt: skip
        if tool["description"]:
            print(f"   {tool['description'][:110]}")
    if payload["excluded_active"]:
        print(f"left out, already active: {', '.join(payload['excluded_active'])}")
    tokens = payload["prompt_tokens"]
    print(f"prompt tokens: {tokens['loaded']} for these {len(payload['tools'])} tools, {tokens['all_tools']} for all "
          f"{payload['catalog_tools']} (saved {tokens['saved']})")  # fmt: skip


def agent_tool_finder_of(
    settings: Settings, index: OneShotIndex, reader: Principal
) -> Callable[[str], list[str]] | None:
    """``ask``'s agent tool search (RAG_AGENT_TOOL_SEARCH) over the one-shot ``index`` as ``reader``; None when off
    (the agent is offered every tool, as before)."""
    from rag_pipeline.retrieval.tool_outcomes import ToolOutcomes
    from rag_pipeline.retrieval.tool_search import ToolSearch, tool_search_config, tool_search_settings
    from rag_pipeline.serving.tool_selection import OneShotTools, agent_tool_finder
    from rag_pipeline.sources.registry import tool_catalog_source

    section = tool_search_settings(settings.source(tool_catalog_source()))
    if not section.agent_tool_search:
        return None
    # The data folder's outcomes rank the tools as the service would; the command exits right after its answer.
    tools = OneShotTools(index, ToolSearch(tool_search_config(section)), ToolOutcomes(settings.paths.tool_outcomes))
    return agent_tool_finder(tools, reader)
