"""The ``rag-pipeline`` command."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings

from rag_pipeline.backfill import DEFAULT_BRIDGE_DAYS


def _demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from rag_pipeline.backfill import run_backfill

    console = Console(stderr=True)
    # Dagster logs every event of thousands of partitions; the progress bar says what matters.
    logging.getLogger("dagster").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("partitions"),
        TimeElapsedColumn(),
        console=console,
        disable=args.json or not console.is_terminal,
    ) as progress:
        tasks: dict[str, int] = {}

        def on_progress(source: str, done: int, total: int) -> None:
            if source not in tasks:
                tasks[source] = progress.add_task(source, total=total)
            progress.update(tasks[source], completed=done)
            if not console.is_terminal and not args.json:
                console.print(f"{source}: {done}/{total} partitions", highlight=False)

        summary = run_backfill(
            data_dir=args.data_dir,
            bridge_days=args.bridge_days,
            full_refresh=args.full_refresh,
            sources=tuple(args.source),
            on_progress=on_progress,
        )
    result = summary.as_dict()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    table = Table(title=f"rag-pipeline demo ({result['seconds']} s)")
    for column in (
        "source",
        "documents",
        "parent chunks",
        "child chunks",
        "points",
        "embeddings computed",
        "embeddings cached",
        "runs",
        "runs skipped (unchanged)",
    ):
        table.add_column(column, justify="right" if column != "source" else "left")
    for name, s in result["per_source"].items():
        table.add_row(
            name,
            *(
                str(s[k])
                for k in (
                    "documents",
                    "parent_chunks",
                    "child_chunks",
                    "points",
                    "embeddings_computed",
                    "embeddings_cached",
                    "runs",
                    "runs_skipped",
                )
            ),
        )
    Console().print(table)
    stages = Table(title="seconds per stage")
    stages.add_column("stage")
    for name in result["per_source"]:
        stages.add_column(name, justify="right")
    stage_names = list(next(iter(result["per_source"].values()))["stage_seconds"]) if result["per_source"] else []
    for stage in stage_names:
        stages.add_row(stage, *(str(s["stage_seconds"].get(stage, 0.0)) for s in result["per_source"].values()))
    Console().print(stages)
    print(
        f"Dagster instance: {result['dagster_home']}  (open the UI: DAGSTER_HOME={result['dagster_home']} dagster dev)"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-pipeline",
        description="Slack and Jira into a permission-aware hybrid Qdrant index, with Dagster.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="index the bundled Slack export and Jira dump through every partitioned asset",
        description="Registers the bundled data's channels/projects as partitions and materializes every "
        "partition that holds data (in-process, one run per stretch of consecutive days). Re-running skips "
        "stretches already indexed from the same source files; --full-refresh recomputes them (embeddings "
        "then come from the cache).",
    )
    demo.add_argument("--json", action="store_true", help="print the summary as JSON")
    demo.add_argument("--data-dir", default=None, help="data folder (default: $RAG_DATA_DIR or ./.rag_data)")
    demo.add_argument("--source", action="append", choices=["slack", "jira"], help="only this source (repeatable)")
    demo.add_argument("--full-refresh", action="store_true", help="re-materialize stretches already indexed")
    demo.add_argument(
        "--bridge-days",
        type=int,
        default=DEFAULT_BRIDGE_DAYS,
        help="empty days between two stretches that still share one run (default: %(default)s)",
    )
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "source", None) is None:
        args.source = ["slack", "jira"]
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
