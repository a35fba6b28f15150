"""``rag-pipeline index``: a team's own Slack export, Jira dump or Jira CSV export through every partitioned asset.

Each source is indexed under its own identity (workspace or site), taken from the data where it holds one and
from ``--slack-team``/``--slack-domain``/``--jira-site`` otherwise; the data folder remembers it and refuses
another. Without a path, the bundled data is indexed (``demo`` is this plus the evaluation).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from rag_pipeline.commands.arguments import existing_input, non_negative_int, writable_folder
from rag_pipeline.commands.errors import FAILURE, CommandError
from rag_pipeline.runs.backfill import DEFAULT_BRIDGE_DAYS, NothingRead, run_backfill
from rag_pipeline.runs.skipped import Skipped, print_skipped, report_path
from rag_pipeline.settings import Settings
from rag_pipeline.sources.problems import RecordProblem, SourceError
from rag_pipeline.vectors.progress import PROGRESS_FIELD, PROGRESS_LOGGER, ProgressUpdate
from rag_pipeline.vectors.sparse import cjk_tokenizer_advice


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``index`` and ``demo`` share."""
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--data-dir", default=None, help="data folder (default: $RAG_DATA_DIR or ./.rag_data)")
    parser.add_argument("--source", action="append", choices=["slack", "jira"], help="only this source (repeatable)")
    parser.add_argument("--full-refresh", action="store_true", help="re-materialize stretches already indexed")
    parser.add_argument(
        "--bridge-days",
        type=non_negative_int,
        default=DEFAULT_BRIDGE_DAYS,
        help="empty days between two stretches that still share one run (default: %(default)s)",
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    index = sub.add_parser(
        "index",
        help="index your own Slack export, Jira dump or Jira CSV export (default: the bundled data)",
        description="Registers the data's channels/projects as partitions and materializes every partition that "
        "holds data (one run per stretch of consecutive days). Each source is indexed under its own workspace or "
        "site: from the data where it names one (Slack: team ids on users and messages, the workspace host in "
        "permalinks; Jira dump: the issues' self URLs), else from --slack-team/--slack-domain/--jira-site; one "
        "data folder holds one workspace and one site. Re-running skips stretches already indexed.",
        epilog="examples:\n"
        "  rag-pipeline index --slack-export acme-export.zip --data-dir acme\n"
        "  rag-pipeline index --jira-csv jira1.csv --jira-csv jira2.csv --jira-site jira.acme.com\n"
        "  rag-pipeline index --jira-dump issues.jsonl.gz --source jira --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    index.add_argument("--slack-export", type=Path, help="Slack export folder or zip (RAG_SLACK_EXPORT)")
    index.add_argument("--jira-dump", type=Path, help="Jira REST issues as JSON lines, .gz or not (RAG_JIRA_DUMP)")
    index.add_argument(
        "--jira-csv",
        type=Path,
        action="append",
        help="Jira's CSV export (Export > CSV, all fields); repeatable (RAG_JIRA_CSV, paths joined by ':')",
    )
    index.add_argument("--slack-team", help="workspace team id where the export names none (SLACK_TEAM_ID)")
    index.add_argument("--slack-domain", help="workspace host for links, e.g. acme.slack.com (SLACK_WORKSPACE_DOMAIN)")
    index.add_argument("--jira-site", help="Jira site host where the data names none, e.g. jira.acme.com (JIRA_SITE)")
    index.add_argument(
        "--jira-date-format",
        help="strptime formats of the CSV's dates, '|'-separated, tried in turn (RAG_JIRA_CSV_DATE_FORMAT; "
        "default: Jira's '30/Sep/21 5:20 PM' and '30/Sep/21 17:20')",
    )
    index.add_argument("--jira-csv-delimiter", help="the CSV's field separator (RAG_JIRA_CSV_DELIMITER; default ',')")
    index.add_argument(
        "--jira-directory",
        type=Path,
        help="CSV of Jira accounts for the principal directory, columns account_id,email,groups (groups ';'-separated: "
        "a Jira group, project:KEY or security:LEVEL_ID), for dumps that hold no membership (RAG_JIRA_DIRECTORY)",
    )
    add_common_arguments(index)
    index.set_defaults(func=run)


# Where each offline source is read from: (what, the variable or option that sets it, the Settings fields).
_SOURCE_PATHS = {
    "slack": ("Slack export", "--slack-export", "RAG_SLACK_EXPORT", "slack_export"),
    "jira": ("Jira dump", "--jira-dump", "RAG_JIRA_DUMP", "jira_dump"),
}


def check_paths(settings: Settings, sources: list[str], options: bool = True) -> None:
    """Every path the command reads or writes, checked before the first run so that a wrong one stops with a
    line naming it and what gave it (``options``: the command takes the paths as options too)."""
    writable_folder(settings.data_dir, "data folder", "--data-dir / RAG_DATA_DIR")
    if settings.dagster_home is not None:
        writable_folder(settings.dagster_home, "Dagster instance folder", "DAGSTER_HOME")
    for source in sources:
        if source == "jira" and settings.jira_csv:
            for path in settings.jira_csv:
                existing_input(path, "Jira CSV export", "--jira-csv / RAG_JIRA_CSV" if options else "RAG_JIRA_CSV")
            continue
        what, option, variable, field = _SOURCE_PATHS[source]
        existing_input(Path(getattr(settings, field)), what, f"{option} / {variable}" if options else variable)
    if "jira" in sources and settings.jira_directory is not None:
        flag = "--jira-directory / RAG_JIRA_DIRECTORY" if options else "RAG_JIRA_DIRECTORY"
        existing_input(settings.jira_directory, "Jira directory file", flag)


def settings_from_arguments(args: argparse.Namespace, settings: Settings) -> Settings:
    """The settings with the sources and identities given on the command line."""
    return settings.with_offline_sources(
        slack_export=args.slack_export.resolve() if args.slack_export else None,
        jira_dump=args.jira_dump.resolve() if args.jira_dump else None,
        jira_csv=tuple(p.resolve() for p in args.jira_csv or ()),
        slack_team=args.slack_team,
        slack_domain=args.slack_domain,
        jira_site=args.jira_site,
        jira_csv_date_format=args.jira_date_format,
        jira_csv_delimiter=args.jira_csv_delimiter,
        jira_directory=args.jira_directory.resolve() if getattr(args, "jira_directory", None) else None,
    )


def chosen_sources(args: argparse.Namespace) -> list[str]:
    """--source where it narrows (the default is both), else the sources given by path, else both."""
    if sorted(args.source) != ["jira", "slack"]:
        return list(args.source)
    given = [s for s, path in (("slack", args.slack_export), ("jira", args.jira_dump or args.jira_csv)) if path]
    return given or list(args.source)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.jira_dump and args.jira_csv:
        raise CommandError("give --jira-dump or --jira-csv, not both (one Jira source per data folder)")
    settings = settings_from_arguments(args, settings)
    args.source = chosen_sources(args)
    console = Console(stderr=True)
    check_paths(settings, args.source)
    result = index_sources(args, settings, console, title="rag-pipeline index")
    for source, figures in result["per_source"].items():
        cjk, chunks = figures["cjk_child_chunks"], figures["child_chunks"]
        advice = cjk_tokenizer_advice(settings.bm25_tokenizer, cjk, chunks, source)
        if advice:
            print(f"warning: {advice}", file=sys.stderr)  # never wrapped: a log line to grep
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_summary(result, "rag-pipeline index")
    # With --json too: stdout stays one JSON document, and a person reading stderr still sees what was dropped.
    print_skipped(result["skipped"], sys.stderr)
    return 0


def index_sources(
    args: argparse.Namespace, settings: Settings, console: Console, title: str, command: str = "index"
) -> dict[str, Any]:
    """The backfill with a progress bar per source (a line per update where stderr is not a terminal), and
    its ``skipped`` records written to the data folder (:mod:`rag_pipeline.runs.skipped`). A source of which
    nothing could be read is an error naming it (exit 1), its skipped records written all the same."""
    try:
        result, problems = _backfill(args, settings, console)
    except NothingRead as exc:
        skipped = Skipped()
        skipped.add(exc.source, exc.problems)
        report = skipped.write(report_path(settings, command))
        raise CommandError(f"{exc}; full list: {report}", FAILURE) from exc
    skipped = Skipped()
    for source, found in problems.items():
        skipped.add(source, found)
    result["directory"] = _refresh_directory(settings, list(args.source), skipped)
    result["skipped"] = skipped.summary(skipped.write(report_path(settings, command)))
    return result


def _refresh_directory(settings: Settings, sources: list[str], skipped: Skipped) -> dict[str, Any]:
    """The principal directory of the sources just indexed, so a person can be looked up right away. The index
    is written either way: a directory that cannot be refreshed is a warning naming why."""
    from rag_pipeline.runs.directory import refresh_directories

    try:
        done = refresh_directories(settings, sources, live=False)
    except SourceError as exc:
        print(f"warning: the principal directory was not refreshed: {exc}", file=sys.stderr)
        return {"error": str(exc)}
    out: dict[str, Any] = {}
    for sync in done:
        print(sync.summary(), file=sys.stderr)  # never wrapped: a log line to grep
        # Under the source's own name: a manifest entry both the reader and the directory turned away is one record.
        skipped.add(sync.source, sync.problems)
        out[sync.source] = sync.as_metadata()
    return out


def _backfill(
    args: argparse.Namespace, settings: Settings, console: Console
) -> tuple[dict[str, Any], dict[str, list[RecordProblem]]]:
    """``run_backfill`` under the progress display: its summary and, per source, the problems of its read."""
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TimeElapsedColumn(),
        console=console,
        disable=args.json or not console.is_terminal,
    ) as progress:
        tasks: dict[str, TaskID] = {}

        def on_progress(source: str, done: int, total: int) -> None:
            if source not in tasks:
                tasks[source] = progress.add_task(source, total=total, unit="partitions")
            progress.update(tasks[source], completed=done)
            if not console.is_terminal and not args.json:
                console.print(f"{source}: {done}/{total} partitions", highlight=False)

        def on_step_progress(update: ProgressUpdate) -> None:
            # The run's own step reports (every tenth or 30 s): a bar on a terminal, the line in a log.
            if console.is_terminal:
                key = f"step:{update.what}"
                if key not in tasks:
                    tasks[key] = progress.add_task(update.what, total=update.total, unit="")
                progress.update(tasks[key], completed=update.done, total=update.total, unit=update.speed())
            elif not args.json:
                console.print(update.line(), highlight=False)

        with step_progress(on_step_progress):
            summary = run_backfill(
                settings,
                bridge_days=args.bridge_days,
                full_refresh=args.full_refresh,
                sources=tuple(args.source),
                on_progress=on_progress,
            )
    return summary.as_dict(), summary.problems


@contextmanager
def step_progress(callback: Callable[[ProgressUpdate], None]) -> Iterator[None]:
    """Pass the progress that in-process steps publish (``rag_pipeline.progress``) to ``callback``."""

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            update = getattr(record, PROGRESS_FIELD, None)
            if isinstance(update, ProgressUpdate):
                callback(update)

    handler = _Handler(level=logging.INFO)
    previous = PROGRESS_LOGGER.level
    PROGRESS_LOGGER.addHandler(handler)
    PROGRESS_LOGGER.setLevel(logging.INFO)
    try:
        yield
    finally:
        PROGRESS_LOGGER.removeHandler(handler)
        PROGRESS_LOGGER.setLevel(previous)


# The summary: (title, key in the per-source figures).
_COLUMNS = (
    ("documents", "documents"),
    ("parent chunks", "parent_chunks"),
    ("child chunks", "child_chunks"),
    ("points", "points"),
    ("embeddings computed", "embeddings_computed"),
    ("embeddings cached", "embeddings_cached"),
    ("runs", "runs"),
    ("runs skipped (unchanged)", "runs_skipped"),
)


def describe_identity(source: str, identity: dict[str, str | None]) -> str:
    if source == "slack":
        host = identity.get("domain")
        links = f"links on {host}" if host else "no links (no workspace host found; pass --slack-domain)"
        return f"Slack workspace {identity.get('team_id')}, {links}"
    return f"Jira site {identity.get('site')}"


def print_summary(result: dict[str, Any], title: str) -> None:
    """Tables on a terminal; ``key: value`` lines otherwise, which an 80-column log never cuts."""
    console = Console()
    for source, identity in result.get("identities", {}).items():
        print(f"{source}: {describe_identity(source, identity)}")  # never wrapped: a log line to grep
    if not console.is_terminal:
        print(f"{title} ({result['seconds']} s)")
        for name, figures in result["per_source"].items():
            print(f"{name}:")
            for label, key in _COLUMNS:
                print(f"  {label}: {figures[key]}")
            per_stage = ", ".join(f"{stage} {seconds}" for stage, seconds in figures["stage_seconds"].items())
            print(f"  seconds per stage: {per_stage or '-'}")
        return
    table = Table(title=f"{title} ({result['seconds']} s)")
    table.add_column("source")
    for label, _ in _COLUMNS:
        table.add_column(label, justify="right")
    for name, figures in result["per_source"].items():
        table.add_row(name, *(str(figures[key]) for _, key in _COLUMNS))
    console.print(table)
    stages = Table(title="seconds per stage")
    stages.add_column("stage")
    for name in result["per_source"]:
        stages.add_column(name, justify="right")
    per_source = list(result["per_source"].values())
    for stage in per_source[0]["stage_seconds"] if per_source else []:
        stages.add_row(stage, *(str(s["stage_seconds"].get(stage, 0.0)) for s in per_source))
    console.print(stages)
