"""``rag-pipeline tree [PREFIX] --user PERSON``: what a reader can search (sources, then channels and projects with
their document counts and latest activity), as the service's ``GET /v1/tree`` and the MCP ``list_containers``;
``--root-path``/``--max-depth`` list the deeper tree (documents, Confluence pages under their parents), a page of
``--limit`` nodes from ``--offset``."""

from __future__ import annotations

import argparse
import json

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.retrieval.tree_view import DEFAULT_TREE_DEPTH, DEFAULT_TREE_LIMIT, MAX_TREE_DEPTH, MAX_TREE_LIMIT
from rag_pipeline.settings import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    tree = sub.add_parser(
        "tree",
        help="list the sources and channels/projects a reader can search, with document counts",
        description="Reads the index with the reader's access (the same filter as a search): a channel or project "
        "is listed only when the reader may read one of its documents, so a private channel's name never shows "
        "to a non-member. PREFIX keeps the paths starting with it (slack/#eng, jira/OPS); `search --path` and the "
        "service's `path` take the same. Exit 0; 2 without a reader.",
    )
    tree.add_argument("prefix", nargs="?", default=None, help="a path's beginning: slack, slack/#eng, jira/OPS")
    tree.add_argument("--user", default=None, help="the reader: an email or account id (through the directory)")
    tree.add_argument("--groups", default=None, help="the reader's groups, comma-separated, instead of --user's")
    tree.add_argument("--root-path", default=None, help="list the tree from this node: slack/#eng, confluence/ENG/123")
    tree.add_argument(
        "--max-depth",
        type=int,
        default=None,
        help=f"levels below the root (0-{MAX_TREE_DEPTH}; 1: sources and containers, 2: documents, more: child pages)",
    )
    tree.add_argument("--offset", type=int, default=0, help="the first node to print (the listing is paged)")
    tree.add_argument("--limit", type=int, default=DEFAULT_TREE_LIMIT, help=f"nodes per page (1-{MAX_TREE_LIMIT})")
    add_data_dir(tree)
    tree.add_argument("--json", action="store_true", help="print the tree as JSON")
    tree.set_defaults(func=run, reads_data_folder=True, all_documents=False)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from pydantic import ValidationError

    from rag_pipeline.commands.search import principal_from_args
    from rag_pipeline.composition import one_shot_index
    from rag_pipeline.retrieval.tree import tree_json
    from rag_pipeline.retrieval.tree_view import TreeView
    from rag_pipeline.serving.refusal import first_invalid

    if not args.user and not args.groups:
        raise CommandError("tree lists what a reader may search: give --user (email or account id) or --groups")
    deep = args.root_path is not None or args.max_depth is not None
    try:
        view = TreeView(
            root_path=args.root_path,
            max_depth=DEFAULT_TREE_DEPTH if args.max_depth is None else args.max_depth,
            offset=args.offset,
            limit=args.limit,
        )
    except ValidationError as exc:
        field, message = first_invalid(exc, nowhere="")
        raise CommandError(f"{field}: {message}") from None
    reader = principal_from_args(args, settings)
    nodes, page = one_shot_index(settings).tree_view(reader, args.prefix, view)
    sources = tree_json(nodes)
    if args.json:
        print(json.dumps({"prefix": args.prefix, "sources": sources, **page.to_dict()}, indent=2, ensure_ascii=False))
        return 0
    if deep:
        return _print_nodes(page.to_dict())
    if not sources:
        print("nothing to search" + (f" under {args.prefix}" if args.prefix else "") + " for this reader")
    for source in sources:
        print(f"{source['source']}  {source['documents']} documents, latest {source['latest'] or '-'}")
        for node in source["containers"]:  # type: ignore[attr-defined]
            print(f"  {node['path']:<40} {node['documents']:>7}  {node['latest'] or '-'}")
    return 0


def _print_nodes(page: dict[str, object]) -> int:
    nodes: list[dict[str, object]] = page["nodes"]  # type: ignore[assignment]
    if not nodes:
        print("nothing to list" + (f" under {page['root_path']}" if page["root_path"] else "") + " for this reader")
    top = min((int(n["level"]) for n in nodes), default=0)  # type: ignore[call-overload]
    for node in nodes:
        indent = "  " * (int(node["level"]) - top)  # type: ignore[call-overload]
        label = f"{indent}{node['name']} [{node['kind']}]"
        print(f"{label:<50} {node['documents']:>7}  {node['path']}")
    if page["next_offset"] is not None:
        print(f"... {page['total']} nodes in all: --offset {page['next_offset']} for the next page")
    return 0
