"""``rag-pipeline directory``: refresh who exists and what they belong to, from each source's API where it is
configured and from the offline files otherwise (``index`` and ``sync`` do this for the sources they read)."""

from __future__ import annotations

import argparse
import json
import sys

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.index import add_source_options, settings_from_arguments
from rag_pipeline.directory.sync import DirectorySync
from rag_pipeline.settings import Settings
from rag_pipeline.sources.registry import source_names


def add_parser(sub: argparse._SubParsersAction) -> None:
    directory = sub.add_parser(
        "directory",
        help="refresh the principal directory (who exists, their groups and channels) without indexing",
        description="Reads each source's people and memberships — Slack: users.list and the members of private and "
        "shared channels (or an export's users.json, channels.json, groups.json, mpims.json); Jira: groups and their "
        "members, Browse projects grants and security levels (or the people a dump names plus --jira-directory) — "
        "writes them to <data dir>/directory.sqlite in one transaction per source, and rewrites the ACL of indexed "
        "threads of channels whose members changed. `whois` and `explain` read it; searches resolve readers from it.",
    )
    directory.add_argument("--source", action="append", choices=source_names(), help="only this source (repeatable)")
    directory.add_argument("--offline", action="store_true", help="read the offline files even where an API is set")
    add_source_options(directory, lambda option: option.directory)
    add_data_dir(directory)
    directory.add_argument("--json", action="store_true", help="print what each sync did as JSON")
    directory.set_defaults(func=run)


def print_directory_syncs(done: list[DirectorySync], stream: object = sys.stderr) -> None:
    """One line per source, then the records skipped (the first few)."""
    for sync in done:
        print(sync.summary(), file=stream)  # type: ignore[call-overload]
        for problem in sync.problems[:5]:
            print(f"  skipped: {problem}", file=stream)  # type: ignore[call-overload]
        if len(sync.problems) > 5:
            print(f"  ... and {len(sync.problems) - 5} more", file=stream)  # type: ignore[call-overload]


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.runs.directory import refresh_directories, sources_without_directory

    settings = settings_from_arguments(args, settings)
    sources = args.source or source_names()
    done = refresh_directories(settings, sources, live=False if args.offline else None)
    # Said, never silently passed over: a source named with --source that has no directory to refresh.
    none = sources_without_directory(settings, args.source or [])
    for source in none:
        print(f"{source}: keeps no principal directory (its documents carry their readers); nothing to refresh",
              file=sys.stderr)  # fmt: skip
    if args.json:
        rows = [{**d.as_metadata(), "skipped": [str(p) for p in d.problems]} for d in done]
        rows += [{"source": source, "refreshed": False, "reason": "keeps no principal directory"} for source in none]
        print(json.dumps(rows, indent=2))
    else:
        print_directory_syncs(done, sys.stdout)
    return 0
