"""``rag-pipeline tools QUERY``: tool search from the command line (the service's ``POST /v1/tools/search`` and
the MCP ``search_tools``), and ``--outcome NAME=ok|failed`` to record whether a call worked."""

from __future__ import annotations

import argparse
import json

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.composition import dense_encoder_of
from rag_pipeline.settings import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    tools = sub.add_parser(
        "tools",
        help="find the few tools a task needs among the indexed tool definitions",
        description="Searches the tools indexed from RAG_TOOLS_CATALOG and RAG_TOOLS_MCP_SERVERS (`rag-pipeline "
        "index --tools-catalog FILE --source tools`) with the multi-signal score: 0.5 semantic + 0.3 usage + 0.2 "
        "success (RAG_TOOL_SEARCH_WEIGHTS), usage and success read from the data folder's tool_outcomes.sqlite, "
        "the critical tools (RAG_TOOLS_CRITICAL) always listed, and the prompt tokens the tools cost against "
        "loading every one. --outcome records a call instead. Exit 0; 2 on a bad argument or unknown tool.",
    )
    tools.add_argument("query", nargs="?", default=None, help="the task, in words")
    tools.add_argument("--top-k", type=int, default=None, help="tools besides the critical ones (default 5)")
    tools.add_argument("--mode", choices=("multi-signal", "vector", "bm25", "hybrid"), default="multi-signal")
    tools.add_argument("--outcome", default=None, metavar="NAME=ok|failed", help="record one call of tool NAME")
    add_data_dir(tools)
    tools.add_argument("--json", action="store_true", help="print JSON")
    tools.set_defaults(func=run, reads_data_folder=True)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.composition import one_shot_index
    from rag_pipeline.retrieval.principal import Principal
    from rag_pipeline.retrieval.tool_outcomes import ToolOutcomes
    from rag_pipeline.retrieval.tool_search import ToolSearch, outcome_record, tool_search_config, tool_search_settings
    from rag_pipeline.serving.schemas import ToolSearchRequest
    from rag_pipeline.sources.registry import tool_catalog_source

    if (args.query is None) == (args.outcome is None):
        raise CommandError("give a QUERY to search, or --outcome NAME=ok|failed to record a call (not both)")
    if args.top_k is not None and args.top_k < 1:
        raise CommandError(f"--top-k must be at least 1, got {args.top_k}")
    tools = tool_search_settings(settings.source(tool_catalog_source()))
    outcomes = ToolOutcomes(settings.paths.tool_outcomes)
    dense = None if args.mode == "bm25" or args.outcome is not None else (lambda: dense_encoder_of(settings))
    index = one_shot_index(settings, dense=dense)
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
        # The command line's arguments are checked by argparse; the service's limits are for remote callers.
        request = ToolSearchRequest.model_construct(query=args.query, mode=args.mode, top_k=args.top_k)
        # Tools are public: any reader sees the same catalog, so the command needs no --user.
        reader = Principal(user_id="rag-pipeline-cli")
        found = index.search_tools(ToolSearch(tool_search_config(tools)), request, reader, outcomes)
    finally:
        outcomes.close()
    payload = found.to_dict()
    if args.json:
        print(json.dumps(payload, indent=2, ensure_ascii=False))
        return 0
    for warning in found.warnings:
        print(f"warning: {warning}")
    for rank, tool in enumerate(payload["tools"], start=1):
        mark = " (critical)" if tool["critical"] else ""
        signals = tool["signals"]
        print(f"{rank}. {tool['name']}{mark}  score {tool['score']:.3f} = semantic {signals['semantic']:.2f}, "
              f"usage {signals['usage']:.2f}, success {signals['success']:.2f}")  # fmt: skip
        if tool["description"]:
            print(f"   {tool['description'][:110]}")
    tokens = payload["prompt_tokens"]
    print(f"prompt tokens: {tokens['loaded']} for these {len(payload['tools'])} tools, {tokens['all_tools']} for all "
          f"{payload['catalog_tools']} (saved {tokens['saved']})")  # fmt: skip
    return 0
