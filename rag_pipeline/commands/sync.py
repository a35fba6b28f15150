"""``rag-pipeline sync``: sync days of a live source into the index and print what changed."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from rag_pipeline.commands.arguments import add_data_dir, iso_day, writable_folder
from rag_pipeline.commands.errors import FAILURE, CommandError, find_connection_failure, redact_url
from rag_pipeline.commands.progress import task_bars
from rag_pipeline.runs.skipped import Skipped, print_skipped, report_path
from rag_pipeline.settings import Settings
from rag_pipeline.sources.problems import SourceError
from rag_pipeline.sources.registry import LiveApi, registered_sources


def _live_sources() -> dict[str, LiveApi]:
    """The registered sources with a live API, and what ``sync`` needs to know of it."""
    return {name: s.live_api for name, s in registered_sources().items() if s.live_api is not None}


def add_parser(sub: argparse._SubParsersAction) -> None:
    live = _live_sources()
    sync = sub.add_parser(
        "sync",
        help="sync days of a live source (" + ", ".join(live) + ") into the index (through the Dagster assets, "
        "in-process)",
        description="Discovers the containers (channels, projects) the connector can read, registers them as "
        "partitions and materializes the source's chain for every (day, container) from --start to --end (one run per "
        "RAG_SYNC_MAX_RANGE_DAYS days, so a year is read, embedded and written a month at a time), or from each "
        "container's watermark through today (a backlog a capped range per run, resuming from the watermarks after "
        "an interruption; a container that cannot be read fails alone), then reconciles deletions (and moves) for "
        "those containers. What each source needs: "
        + "; ".join(f"{name}: {api.required[0]} ({api.required[1]})" for name, api in live.items())
        + ".",
    )
    sync.add_argument("--source", required=True, choices=sorted(live), help="the live source to sync")
    sync.add_argument(
        "--start",
        default=None,
        type=iso_day,
        help="first UTC day, YYYY-MM-DD (default: each container from its watermark, as the daemon's sync does; "
        "a container never synced gets its initial history, SLACK_/JIRA_INITIAL_HISTORY_DAYS)",
    )
    sync.add_argument("--end", default=None, type=iso_day, help="last UTC day, YYYY-MM-DD (default: today)")
    for name, api in live.items():
        sync.add_argument(
            api.containers_flag,
            dest=f"{name}__containers",
            metavar="NAME",
            action="append",
            default=[],
            help=api.containers_help,
        )
    sync.add_argument(
        "--readable-only",
        action="store_true",
        help="skip (and report) named containers the connector cannot read instead of failing on them (the targeted "
        "syncs of Slack events and Jira/Confluence webhooks)",
    )
    sync.add_argument(
        "--run-tag",
        dest="run_tags",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        type=_run_tag,
        help="a tag for the sync's Dagster runs, under rag/ (repeatable; e.g. the events a targeted sync covers)",
    )
    sync.add_argument(
        "--no-directory",
        action="store_true",
        help="leave the principal directory as it is (a targeted sync of content-only events, e.g. Slack messages "
        "posted; the scheduled sync refreshes it)",
    )
    sync.add_argument("--no-reconcile", action="store_true", help="skip removing documents deleted at the source")
    add_data_dir(sync)
    sync.add_argument("--json", action="store_true", help="print the summary as JSON")
    sync.set_defaults(func=run)


def _run_tag(value: str) -> tuple[str, str]:
    key, sep, text = value.partition("=")
    if not sep or not key.startswith("rag/") or len(key) > 64 or len(text) > 2000:
        raise argparse.ArgumentTypeError("expected rag/KEY=VALUE (key at most 64, value at most 2000 characters)")
    return key, text


def _api_url(source: str, settings: Settings) -> tuple[str, str | None]:
    """The configured API address of ``source`` and the variable that sets it (None: the client's default)."""
    url, variable = settings.source(source).api_address() or ("", None)
    return redact_url(url), variable


def _unreachable(exc: BaseException, source: str, settings: Settings) -> CommandError | None:
    """One line naming the API address when ``exc`` comes from a server that could not be reached.

    The Jira reader already turns it into a sentence (which names JIRA_URL but not its value); slack-sdk
    raises urllib's ``URLError``, which names neither."""
    found = find_connection_failure(exc)
    if found is None:
        return None
    url, variable = _api_url(source, settings)
    if isinstance(exc, SourceError):
        message = str(exc) if url in str(exc) else f"{exc} ({variable or 'API'}: {url})"
    else:
        label = _live_sources()[source].label
        check = f"check {variable} and the network" if variable else "check the network"
        message = f"the {label} at {url} could not be reached ({found[1]}): {check}"
    return CommandError(message, FAILURE)


def _refresh_directory(settings: Settings, source: str, skipped: Skipped) -> dict[str, object]:
    """The source's principal directory, read from its API after the sync (users, groups, channel members);
    a directory that cannot be read is a warning: the synced documents are in the index either way."""
    from rag_pipeline.runs.directory import refresh_directories

    try:
        (done,) = refresh_directories(settings, [source])
    except SourceError as exc:  # access errors and tripped page guards alike
        print(f"warning: the principal directory was not refreshed: {exc}", file=sys.stderr)
        return {"error": str(exc)}
    print(done.summary(), file=sys.stderr)
    skipped.add(f"{source} directory", done.problems)
    return done.as_metadata()


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.commands.index import refuse_other_chunk_sizes
    from rag_pipeline.runs.live_sync import run_sync

    refuse_other_chunk_sizes(settings)
    console = Console(stderr=True, soft_wrap=True)
    live = _live_sources()
    if args.source not in settings.live_sources:
        variable, what = live[args.source].required
        raise CommandError(f"{variable} is not set ({what})")
    containers = getattr(args, f"{args.source}__containers")
    for name, api in live.items():
        if name != args.source and getattr(args, f"{name}__containers"):
            raise CommandError(f"{api.containers_flag} does not apply to --source {args.source}")
    end = args.end or time.strftime("%Y-%m-%d", time.gmtime())  # the runner's default: today (UTC)
    if args.start is not None and end < args.start:
        raise CommandError(f"--end {end} is before --start {args.start}" + ("" if args.end else " (today, UTC)"))
    writable_folder(settings.data_dir, "data folder", "--data-dir / RAG_DATA_DIR")
    if settings.dagster_home is not None:
        writable_folder(settings.dagster_home, "Dagster instance folder", "DAGSTER_HOME")
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
                readable_only=args.readable_only,
                run_tags=dict(args.run_tags),
            )
    except Exception as exc:
        unreachable = _unreachable(exc, args.source, settings)
        if unreachable is None:
            raise  # the command line reports it (rag_pipeline.commands.errors)
        raise unreachable from exc
    result = summary.as_dict()
    skipped = Skipped()
    skipped.add(args.source, summary.problems)
    # Each run's metadata lists its first problems only; the rest are counted.
    skipped.unlisted = max(0, summary.bad_records - len(skipped.records))
    if args.no_directory:
        result["directory"] = {"skipped": "--no-directory"}
    else:
        result["directory"] = _refresh_directory(settings, args.source, skipped)
    result["skipped"] = skipped.summary(skipped.write(report_path(settings, "sync")))
    # Steps the caller turned off (a targeted sync of events does): said on stderr and in --json, never silent.
    result["steps_skipped"] = {flag: what for flag, what, off in _optional_steps(args) if off}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        Console().print(sync_table(result, args.source))
        label = registered_sources()[args.source].containers_label
        prefix = live[args.source].container_prefix
        print(f"{label}: " + (", ".join(f"{prefix}{c}" for c in result["containers"]) or "none"))
        for name, message in result["failed"].items():
            console.print(f"failed: {name}: {message}", style="red", markup=False, highlight=False)
    print_skipped(result["skipped"], sys.stderr)  # with --json too: stdout stays one JSON document
    for flag, what in result["steps_skipped"].items():
        print(f"not done ({flag}): {what}; the scheduled sync does it", file=sys.stderr)
    return 1 if result["failed"] else 0


def _optional_steps(args: argparse.Namespace) -> list[tuple[str, str, bool]]:
    """The steps a sync may be told to leave out: (flag, what is then not done, whether it was)."""
    return [
        ("--no-directory", "the principal directory was not refreshed", args.no_directory),
        ("--no-reconcile", "documents deleted at the source were not looked for", args.no_reconcile),
    ]


def sync_table(result: dict[str, Any], source: str) -> Table:
    """The sync's figures, one ``key  value`` row each: narrow enough for any terminal (the title wraps)."""
    table = Table(title=f"rag-pipeline sync --source {source} {result['start']}..{result['end']}", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right", no_wrap=True)
    for key in ("documents", "documents_updated", "documents_removed", "api_calls", "retries", "seconds", "runs"):
        table.add_row(key, str(result[key]))
    return table
