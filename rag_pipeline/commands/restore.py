"""``rag-pipeline restore SRC [--force] [--check] [--json]``: a backup written by ``rag-pipeline backup`` back into a
data folder, every file checked against the backup's manifest first (:mod:`rag_pipeline.pipeline.backup`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.backup import (
    byte_bars,
    command_error,
    dagster_home,
    index_part,
    print_watermarks,
    read_watermarks,
)
from rag_pipeline.pipeline.backup import BackupError
from rag_pipeline.pipeline.retained import human_bytes
from rag_pipeline.settings import Settings

DESCRIPTION = """\
Restores the backup SRC (a folder written by `rag-pipeline backup`) into the data folder (--data-dir /
RAG_DATA_DIR), its Dagster instance (DAGSTER_HOME, else <data dir>/dagster_home) and, for a backup of a Qdrant
server's collections, the server QDRANT_URL names. Each file is copied into a staging folder inside the
destination and checked against the manifest's size and sha256 (a damaged file is named and nothing is
restored); only then are the copies moved into place. An unfinished backup (DEST.partial) is refused.

The destination must be empty, or --force deletes what it holds first. A folder whose index is open (a search
service, a run) is refused either way: stop the service, the daemon and runs on it first. After a restore,
`rag-pipeline status` shows the restored watermarks; the first sync reads again what ran while the backup was
taken (nothing is duplicated), and an index of an unchanged file is skipped.

Exit 0; 1 for a damaged backup (the file is named); 2 for a destination that is not empty or in use, an
unfinished backup, or a backup of another engine than the one configured."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    restore = sub.add_parser(
        "restore",
        help="restore a backup into an empty data folder (every file checked against the manifest)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    restore.add_argument("src", type=Path, metavar="SRC", help="the backup folder")
    restore.add_argument("--force", action="store_true", help="replace what the destination holds")
    restore.add_argument(
        "--check", action="store_true", help="only check the backup's files against its manifest; write nothing"
    )
    add_data_dir(restore)
    restore.add_argument("--json", action="store_true", help="print the summary as JSON")
    restore.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.index.backup import EmbeddedIndexBackup, ServerIndexBackup
    from rag_pipeline.pipeline.backup import RestoreTarget, restore, summary, verify

    console = Console(stderr=True)
    source = args.src.absolute()
    if args.check:
        try:
            with byte_bars(console, disable=args.json) as progress:
                manifest = verify(source, progress)
        except BackupError as exc:
            raise command_error(exc) from None
        if args.json:
            print(json.dumps({"backup": str(source), "verified": True, **summary(manifest)}, indent=2))
        else:
            print(f"{source}: {len(manifest.files)} files, {human_bytes(manifest.total_bytes)}, all match the manifest")
        return 0

    index = index_part(settings, "rag-pipeline restore")
    home = dagster_home(settings)

    def holder() -> str | None:
        if isinstance(index, EmbeddedIndexBackup):
            held = index.holder()
            return held.held_by() if held is not None else None
        return None

    target = RestoreTarget(
        paths=settings.paths,
        dagster_home=home,
        server=index if isinstance(index, ServerIndexBackup) else None,
        index_holder=holder,
    )
    try:
        with byte_bars(console, disable=args.json) as progress:
            result = restore(source, target, force=args.force, progress=progress)
    except BackupError as exc:
        raise command_error(exc) from None
    # The restored instance's config names the event log of the folder it was taken from; the runners' rule
    # re-points their own config to this folder (and reading the watermarks back checks the instance opens).
    restored_marks = read_watermarks(settings)
    manifest = result.manifest
    if args.json:
        body = {
            "backup": str(source),
            "data_dir": str(settings.data_dir),
            "dagster_home": str(home),
            "seconds": round(result.seconds, 3),
            "replaced": result.replaced,
            "restored_watermarks": restored_marks,
            **summary(manifest),
        }
        print(json.dumps(body, indent=2))
        return 0
    out = Console()
    out.print(
        f"restored {source} (taken {manifest.created_at}) into {settings.data_dir} in {result.seconds:.1f} s: "
        f"{result.files} files, {human_bytes(result.bytes)}, every one matching the manifest",
        highlight=False,
    )
    if result.replaced:
        out.print(f"replaced (--force): {len(result.replaced)} entries the folder held", highlight=False)
    if restored_marks:
        out.print("sync watermarks now:")
        print_watermarks(out, restored_marks)
    for note in manifest.notes:
        out.print(f"note (from the backup): {note}", highlight=False)
    return 0
