"""``rag-pipeline backup DEST [--skip-caches] [--json]``: a consistent copy of everything a restore of the data folder
needs, taken while the search service and the daemon go on running (:mod:`rag_pipeline.pipeline.backup` says what,
in which order and why; ``docs/guides/backup.md``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import FAILURE, USAGE, CommandError
from rag_pipeline.commands.progress import task_bars
from rag_pipeline.pipeline.backup import BackupCorrupt, BackupError
from rag_pipeline.pipeline.retained import human_bytes
from rag_pipeline.settings import Settings

if TYPE_CHECKING:
    from rag_pipeline.index.backup import IndexBackup

DESCRIPTION = """\
Copies into DEST (a folder, written as DEST.partial and renamed when complete, so an interrupted backup never
replaces a good one) everything a restore of the data folder needs, with a manifest (sizes, sha256, the sync
watermarks, when it was taken). The service and the daemon may keep running: searches wait (they do not fail)
for the moment the embedded index is copied, under the same lock every opener takes.

copied, in this order:
  the Dagster instance (DAGSTER_HOME, else <data dir>/dagster_home): runs, sync watermarks, what was indexed;
    its SQLite databases through SQLite's online backup API (a PostgreSQL instance: back it up with pg_dump)
  the data folder: weekly parquet files, the principal directory, personal tokens, tool outcomes, the request
    audit and feedback logs, evaluation reports, the learned reranker and calibration, the index's language and
    the sources' identities, the ingestion pause switch
  the index: the embedded folder under its lock, or with QDRANT_URL one Qdrant snapshot per collection
  the caches (rebuildable, left out with --skip-caches): the embedding cache (without it a re-index of a changed
    file embeds every chunk again), query rewrite plans and LLM reranker grades (each costs an LLM call again)
never copied: lock files, service.json, the ingestion API's logs, temporary files.

Restore with `rag-pipeline restore DEST --data-dir NEW`. Exit 0; 1 when a copy fails; 2 for a destination that
holds something other than a backup."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    backup = sub.add_parser(
        "backup",
        help="copy the data folder, its Dagster instance and the index into a backup folder (while running)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    backup.add_argument(
        "dest", type=Path, metavar="DEST", help="the backup folder (a previous backup there is replaced)"
    )
    backup.add_argument(
        "--skip-caches",
        action="store_true",
        help="leave out the embedding cache, rewrite plans and LLM grades (rebuilt on demand, at the cost of "
        "embedding and LLM calls)",
    )
    add_data_dir(backup)
    backup.add_argument("--json", action="store_true", help="print the summary as JSON")
    backup.set_defaults(func=run, reads_data_folder=True)


def byte_bars(console: Console, disable: bool = False) -> AbstractContextManager[Callable[[str, int, int], None]]:
    """One bar per part of a backup or restore, in bytes."""
    return task_bars(console, disable=disable, in_bytes=True)


def dagster_home(settings: Settings) -> Path:
    """The instance's folder the runners use (``runs/instance.py``'s rule), without creating it."""
    return (settings.dagster_home or settings.paths.dagster_home).resolve()


def read_watermarks(settings: Settings) -> dict[str, dict[str, str]]:
    """Each source's containers with a watermark (the sync sensors' own reading of the instance); empty where the
    folder has no instance yet."""
    if not (dagster_home(settings) / "dagster.yaml").is_file():
        return {}
    from rag_pipeline.defs.parts import source_specs
    from rag_pipeline.runs.instance import ensure_dagster_home, open_instance
    from rag_pipeline.runs.sync_runs import source_states

    ensure_dagster_home(settings)
    marks: dict[str, dict[str, str]] = {}
    with open_instance() as instance:
        for name, spec in source_specs(settings).items():
            states, _ = source_states(instance, spec)
            found = {
                s.container: s.watermark.astimezone(UTC).isoformat(timespec="seconds") for s in states if s.watermark
            }
            if found:
                marks[name] = found
    return marks


def index_part(settings: Settings, label: str) -> IndexBackup:
    """The index's part of a backup for the configured engine."""
    from rag_pipeline.composition import store_location
    from rag_pipeline.index.backup import EmbeddedIndexBackup, ServerIndexBackup

    location = store_location(settings)
    if location.url:
        return ServerIndexBackup(location.url, location.api_key, location.names)
    return EmbeddedIndexBackup(
        location.path,
        wait_seconds=settings.store_wait_seconds,
        on_wait=lambda message: print(message, file=sys.stderr, flush=True),
        label=label,
    )


def command_error(exc: BackupError) -> CommandError:
    """A damaged backup is a failure of the data (exit 1); anything else was pointed at the wrong place (exit 2)."""
    return CommandError(str(exc), FAILURE if isinstance(exc, BackupCorrupt) else USAGE)


def print_watermarks(console: Console, watermarks: dict[str, dict[str, str]]) -> None:
    for source, containers in sorted(watermarks.items()):
        oldest = min(containers.values())
        console.print(
            f"  {source}: {len(containers)} channel(s)/project(s) synced through {oldest} at least", highlight=False
        )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.pipeline.backup import BackupSources, back_up, summary

    home = dagster_home(settings)
    sources = BackupSources(
        paths=settings.paths,
        dagster_home=home if home.is_dir() else None,
        index=index_part(settings, "rag-pipeline backup"),
        include_caches=not args.skip_caches,
        watermarks=lambda: read_watermarks(settings),
    )
    console = Console(stderr=True)
    try:
        with byte_bars(console, disable=args.json) as progress:
            result = back_up(sources, args.dest, progress)
    except BackupError as exc:
        raise command_error(exc) from None
    manifest = result.manifest
    if args.json:
        body = {"backup": str(result.path), "seconds": round(result.seconds, 3), **summary(manifest)}
        print(json.dumps({**body, "replaced_previous": result.replaced_previous}, indent=2))
        return 0
    out = Console()
    parts = ", ".join(f"{part} {human_bytes(size)}" for part, size in manifest.part_bytes().items())
    out.print(
        f"backed up {manifest.data_dir} to {result.path} in {result.seconds:.1f} s: {len(manifest.files)} files, "
        f"{human_bytes(manifest.total_bytes)} ({parts})",
        highlight=False,
    )
    if manifest.index_engine == "qdrant-edge":
        out.print(f"the index was held for {manifest.index_held_seconds:.3f} s (searches waited at most that long)")
    if manifest.watermarks:
        out.print("sync watermarks in the backup:")
        print_watermarks(out, manifest.watermarks)
    for note in manifest.notes:
        out.print(f"note: {note}", highlight=False)
    return 0
