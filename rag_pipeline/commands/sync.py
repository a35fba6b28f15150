"""``rag-pipeline sync``: sync days of a live source into the index and print what changed."""

from __future__ import annotations

import argparse
import json
import logging
import warnings

from rich.console import Console
from rich.table import Table

from rag_pipeline.commands.progress import task_bars
from rag_pipeline.settings import Settings
from rag_pipeline.sources.problems import SourceError

# What each source needs in the environment before anything is contacted.
_REQUIRED_ENV = {
    "slack": ("SLACK_BOT_TOKEN", "a Slack bot token, xoxb-..."),
    "jira": ("JIRA_URL", "the Jira site URL, plus JIRA_USERNAME + JIRA_API_TOKEN (Cloud) or JIRA_PAT (Server/DC)"),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    sync = sub.add_parser(
        "sync",
        help="sync days of live Slack or Jira into the index (through the Dagster assets, in-process)",
        description="Discovers the Slack channels or Jira projects the connector can read, registers them as "
        "partitions and materializes the source's chain for every (day, container) from --start to --end (one run "
        "per container, so one that cannot be read fails alone), then reconciles deletions (and, for Jira, moves) "
        "for those containers. Slack needs SLACK_BOT_TOKEN (SLACK_API_BASE_URL for a proxy or emulator); Jira needs "
        "JIRA_URL and JIRA_USERNAME + JIRA_API_TOKEN (Cloud) or JIRA_PAT (Server/Data Center, JIRA_CLOUD=0).",
    )
    sync.add_argument("--source", required=True, choices=sorted(_REQUIRED_ENV), help="the live source to sync")
    sync.add_argument("--start", required=True, help="first UTC day, YYYY-MM-DD")
    sync.add_argument("--end", default=None, help="last UTC day, YYYY-MM-DD (default: today)")
    sync.add_argument(
        "--channel", action="append", default=[], help="Slack channel name or id (repeatable; default: all discovered)"
    )
    sync.add_argument(
        "--project", action="append", default=[], help="Jira project key (repeatable; default: all discovered)"
    )
    sync.add_argument("--no-reconcile", action="store_true", help="skip removing documents deleted at the source")
    sync.add_argument("--data-dir", default=None, help="data folder (default: $RAG_DATA_DIR or ./.rag_data)")
    sync.add_argument("--json", action="store_true", help="print the summary as JSON")
    sync.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.runs.live_sync import run_sync

    console = Console(stderr=True)
    if args.source not in settings.live_sources:
        variable, what = _REQUIRED_ENV[args.source]
        console.print(f"error: {variable} is not set ({what})", style="red")
        return 2
    containers = args.channel if args.source == "slack" else args.project
    wrong = args.project if args.source == "slack" else args.channel
    if wrong:
        option = "--project" if args.source == "slack" else "--channel"
        console.print(f"error: {option} does not apply to --source {args.source}", style="red")
        return 2
    logging.getLogger("dagster").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    try:
        with task_bars(console, disable=args.json) as progress:
            summary = run_sync(
                settings,
                args.source,
                args.start,
                args.end,
                containers=containers,
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
        table = Table(title=f"rag-pipeline sync --source {args.source} {result['start']}..{result['end']}")
        for key in ("documents", "documents_updated", "documents_removed", "api_calls", "retries", "seconds", "runs"):
            table.add_row(key, str(result[key]))
        Console().print(table)
        label = "channels" if args.source == "slack" else "projects"
        prefix = "#" if args.source == "slack" else ""
        print(f"{label}: " + (", ".join(f"{prefix}{c}" for c in result["containers"]) or "none"))
        for name, message in result["failed"].items():
            console.print(f"failed: {name}: {message}", style="red")
    return 1 if result["failed"] else 0
