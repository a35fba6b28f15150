"""``rag-pipeline status``: where the scheduled sync of each live source stands, per channel/project."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.commands.tables import first_fitting, key_value_blocks
from rag_pipeline.defs.parts import source_specs
from rag_pipeline.index.store_lock import FolderLock, LockHolder
from rag_pipeline.pipeline.layout import read_layout
from rag_pipeline.pipeline.policy import sync_policy
from rag_pipeline.settings import Settings
from rag_pipeline.sources.registry import source_names

if TYPE_CHECKING:
    from rag_pipeline.runs.sync_status import SourceStatus


def add_parser(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser(
        "status",
        help="show the data folder's layout (a migration pending?) and each live source's sync: watermarks, lag, "
        "last runs, next tick, days still to fetch",
        description="Reads the Dagster instance (DAGSTER_HOME, else <data dir>/dagster_home) the way the sync sensors "
        "do: per Slack channel / Jira project, the watermark (last instant known to be fully synced), how far behind "
        "it is, the newest source timestamp and sync lag of its last run, its last successful and last failed run "
        "(with the error's first line), what the sensor would request now and the days still to fetch; per source, "
        "its cron and next tick; first, the data folder's layout version and whether an upgrade's migration is "
        "pending. Nothing is contacted.",
    )
    status.add_argument("--source", choices=source_names(), action="append", help="only this source (repeatable)")
    add_data_dir(status)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=run, reads_data_folder=True)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes = int(seconds // 60)
    return f"{minutes // 1440}d {minutes % 1440 // 60}h" if minutes >= 1440 else f"{minutes // 60}h {minutes % 60}m"


def _index_holder(settings: Settings) -> LockHolder | None:
    """Who holds the embedded index now (a search service, a run's step), as its holder recorded it."""
    folder = settings.paths.qdrant
    if settings.qdrant.url or not folder.exists():
        return None
    return FolderLock(folder, "").current_holder()


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.runs.execution import runner_instance
    from rag_pipeline.runs.instance import ensure_dagster_home
    from rag_pipeline.runs.sync_status import source_status

    holder = _index_holder(settings)
    try:
        layout = read_layout(settings.data_dir)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    wanted = [s for s in (args.source or source_names()) if s in settings.live_sources]
    if not wanted:
        # Without a live source there is no sync to describe; the folder's layout (an upgrade pending?) and who
        # holds the index are still worth telling.
        if args.json:
            described: dict[str, object] = {"layout": layout.as_dict(), "sources": []}
            described["index_holder"] = asdict(holder) if holder else None
            print(json.dumps(described, indent=2))
        else:
            print(layout.describe())
            if holder is not None:
                print(f"index: {holder.held_by()}")
            print(
                "no live source is configured (set SLACK_BOT_TOKEN, or JIRA_URL or CONFLUENCE_URL with its "
                "credentials): nothing is synced on a schedule"
            )
        return 0
    ensure_dagster_home(settings)
    specs = source_specs(settings)
    now = datetime.now(UTC)
    with runner_instance() as instance:
        statuses = [
            source_status(
                instance,
                specs[name],
                settings.automation.sync(name).cron,
                sync_policy(settings, name),
                settings.automation.sync(name).enabled,
                now,
            )
            for name in wanted
        ]
    pause = settings.ingestion_pause()
    if args.json:
        print(
            json.dumps(
                {
                    "now": now.isoformat(timespec="seconds"),
                    "layout": layout.as_dict(),
                    "ingestion_paused": asdict(pause) if pause else None,
                    "index_holder": asdict(holder) if holder else None,
                    "sources": [s.as_dict() for s in statuses],
                },
                indent=2,
            )
        )
        return 0
    console = Console()
    console.print(layout.describe(), highlight=False)
    if pause is not None:
        console.print(f"scheduled sync: {pause.describe()}", highlight=False)
    if holder is not None:
        console.print(f"index: {holder.held_by()}", highlight=False)
    for status in statuses:
        switch = "on" if status.enabled else f"off (RAG_{status.source.upper()}_SYNC_ENABLED=0)"
        console.print(f"{status.source}: sync {switch}, cron '{status.cron}' (UTC), next tick {status.next_tick}")
        if not status.containers:
            console.print("  no channels/projects yet (the discovery sensor adds them)")
            continue
        rows = container_rows(status)
        if console.is_terminal:
            console.print(first_fitting(console, container_layouts(rows)))
        else:
            # A log or a pipe: key: value lines, never a table cut to the log's width.
            for row in rows:
                print(f"  {row['container']}:")
                for key, value in list(row.items())[1:]:
                    print(f"    {key}: {value}")
    return 0


def container_rows(status: SourceStatus) -> list[dict[str, str]]:
    """A source's containers, one row each: the columns of the table (the keys of the log's lines)."""
    return [
        {
            "container": c.container,
            "watermark": c.watermark or "never synced",
            "behind": _age(c.behind_seconds),
            "sync lag": _age(c.sync_lag_max_seconds),
            "last success": (c.last_success or {}).get("finished_at") or "-",
            "last failure": f"{c.last_failure['finished_at']}: {c.last_failure.get('error', '')}"
            if c.last_failure
            else "-",
            "next": c.next,
            "days to fetch": str(c.days_to_fetch),
        }
        for c in status.containers
    ]


def container_layouts(rows: list[dict[str, str]]) -> list[RenderableType]:
    """A source's containers as a table, one row per container (a wide terminal), else a ``key  value`` block
    per container, whose long values (an error) wrap in their column."""
    table = Table()
    for column in rows[0]:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(value) for value in row.values()))  # Text: an error's [...] is no markup
    blocks = key_value_blocks({row["container"]: list(row.items())[1:] for row in rows})
    return [table, Padding(blocks, (0, 0, 0, 2))]
