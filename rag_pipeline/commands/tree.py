"""``rag-pipeline tree [PREFIX] --user PERSON``: what a reader can search (sources, then channels and projects with
their document counts and latest activity), as the service's ``GET /v1/tree`` and the MCP ``list_containers``."""

from __future__ import annotations

import argparse
import json

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
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
    add_data_dir(tree)
    tree.add_argument("--json", action="store_true", help="print the tree as JSON")
    tree.set_defaults(func=run, reads_data_folder=True, all_documents=False)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.commands.search import principal_from_args
    from rag_pipeline.composition import one_shot_index
    from rag_pipeline.retrieval.tree import tree_json

    if not args.user and not args.groups:
        raise CommandError("tree lists what a reader may search: give --user (email or account id) or --groups")
    reader = principal_from_args(args, settings)
    sources = tree_json(one_shot_index(settings).tree(reader, args.prefix))
    if args.json:
        print(json.dumps({"prefix": args.prefix, "sources": sources}, indent=2, ensure_ascii=False))
        return 0
    if not sources:
        print("nothing to search" + (f" under {args.prefix}" if args.prefix else "") + " for this reader")
    for source in sources:
        print(f"{source['source']}  {source['documents']} documents, latest {source['latest'] or '-'}")
        for node in source["containers"]:  # type: ignore[attr-defined]
            print(f"  {node['path']:<40} {node['documents']:>7}  {node['latest'] or '-'}")
    return 0
