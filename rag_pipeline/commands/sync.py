"""``rag-pipeline sync``: sync days of a live source into the index and print what changed."""

from __future__ import annotations

import argparse
import json
import logging
import os
import warnings

from rich.console import Console
from rich.table import Table

from rag_pipeline.commands.progress import task_bars
from rag_pipeline.sources.problems import SourceError


def add_parser(sub: argparse._SubParsersAction) -> None:
    sync = sub.add_parser(
        "sync",
        help="sync days of live Slack into the index (through the Dagster assets, in-process)",
        description="Discovers the workspace's channels, registers them as partitions and materializes the Slack "
        "chain for every (day, channel) from --start to --end (one run per channel), then reconciles deletions "
        "for those channels. Needs SLACK_BOT_TOKEN (and SLACK_API_BASE_URL for a proxy or emulator).",
    )
    sync.add_argument("--source", required=True, choices=["slack"], help="the live source to sync")
    sync.add_argument("--start", required=True, help="first UTC day, YYYY-MM-DD")
    sync.add_argument("--end", default=None, help="last UTC day, YYYY-MM-DD (default: today)")
    sync.add_argument(
        "--channel", action="append", default=[], help="channel name or id (repeatable; default: all discovered)"
    )
    sync.add_argument("--no-reconcile", action="store_true", help="skip removing threads deleted at the source")
    sync.add_argument("--data-dir", default=None, help="data folder (default: $RAG_DATA_DIR or ./.rag_data)")
    sync.add_argument("--json", action="store_true", help="print the summary as JSON")
    sync.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rag_pipeline.live_sync import run_slack_sync

    console = Console(stderr=True)
    if not os.environ.get("SLACK_BOT_TOKEN"):
        console.print("error: SLACK_BOT_TOKEN is not set (a Slack bot token, xoxb-...)", style="red")
        return 2
    logging.getLogger("dagster").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    try:
        with task_bars(console, disable=args.json) as progress:
            summary = run_slack_sync(
                args.start,
                args.end,
                channels=args.channel,
                data_dir=args.data_dir,
                reconcile=not args.no_reconcile,
                on_progress=progress,
            )
    except (SourceError, ValueError) as exc:
        console.print(f"error: {exc}", style="red")
        return 2
    result = summary.as_dict()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        table = Table(title=f"rag-pipeline sync --source slack {result['start']}..{result['end']}")
        for key in ("documents", "threads_updated", "documents_removed", "api_calls", "retries", "seconds", "runs"):
            table.add_row(key, str(result[key]))
        Console().print(table)
        print("channels: " + (", ".join(f"#{c}" for c in result["containers"]) or "none"))
        for name, message in result["failed"].items():
            console.print(f"failed: {name}: {message}", style="red")
    return 1 if result["failed"] else 0
