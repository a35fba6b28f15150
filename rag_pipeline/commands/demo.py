"""``rag-pipeline demo``: index the offline sources through every partitioned asset, then evaluate."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from rag_pipeline.commands.arguments import existing_input, non_negative_int, writable_folder
from rag_pipeline.commands.progress import task_bars
from rag_pipeline.runs.backfill import DEFAULT_BRIDGE_DAYS, run_backfill
from rag_pipeline.runs.evaluation import EvaluationSummary, run_evaluation
from rag_pipeline.settings import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
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
        type=non_negative_int,
        default=DEFAULT_BRIDGE_DAYS,
        help="empty days between two stretches that still share one run (default: %(default)s)",
    )
    demo.add_argument("--no-eval", action="store_true", help="skip the retrieval evaluation at the end")
    demo.set_defaults(func=run)


# The summary table: (column title, key in the per-source figures).
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


# Where each offline source is read from: (what, the variable that overrides it, the Settings field).
_SOURCE_PATHS = {
    "slack": ("Slack export", "RAG_SLACK_EXPORT", "slack_export"),
    "jira": ("Jira dump", "RAG_JIRA_DUMP", "jira_dump"),
}


def check_paths(settings: Settings, sources: list[str]) -> None:
    """Every path the demo reads or writes, checked before the first run so that a wrong one stops with a
    line naming it (Dagster would fail later, in its instance setup or a step, with a traceback)."""
    writable_folder(settings.data_dir, "data folder", "--data-dir / RAG_DATA_DIR")
    if settings.dagster_home is not None:
        writable_folder(settings.dagster_home, "Dagster instance folder", "DAGSTER_HOME")
    for source in sources:
        what, variable, field = _SOURCE_PATHS[source]
        existing_input(Path(getattr(settings, field)), what, variable)


def run(args: argparse.Namespace, settings: Settings) -> int:
    console = Console(stderr=True)
    check_paths(settings, args.source)
    result = _index(args, settings, console)
    evaluation = None
    if not args.no_eval:
        changed = result["runs"] > 0 or args.full_refresh
        with task_bars(console, disable=args.json) as on_eval_progress:
            evaluation = run_evaluation(
                settings, force=changed, on_progress=on_eval_progress, sources=tuple(args.source)
            )
        result["evaluation"] = {
            "ran": evaluation.ran,
            "seconds": round(evaluation.seconds, 1),
            "report_dir": evaluation.report_dir,
            "checks": evaluation.checks,
            "failures": evaluation.failures,
            "eval_sets": evaluation.figures,
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    _print_index(result)
    if evaluation is not None:
        _print_evaluation(evaluation)
    home = result["dagster_home"]
    print(f"Dagster instance: {home}  (open the UI: DAGSTER_HOME={home} dagster dev)")
    return 0


def _index(args: argparse.Namespace, settings: Settings, console: Console) -> dict[str, Any]:
    """The backfill with a progress bar per source (a line per update where stderr is not a terminal)."""
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("partitions"),
        TimeElapsedColumn(),
        console=console,
        disable=args.json or not console.is_terminal,
    ) as progress:
        tasks: dict[str, TaskID] = {}

        def on_progress(source: str, done: int, total: int) -> None:
            if source not in tasks:
                tasks[source] = progress.add_task(source, total=total)
            progress.update(tasks[source], completed=done)
            if not console.is_terminal and not args.json:
                console.print(f"{source}: {done}/{total} partitions", highlight=False)

        summary = run_backfill(
            settings,
            bridge_days=args.bridge_days,
            full_refresh=args.full_refresh,
            sources=tuple(args.source),
            on_progress=on_progress,
        )
    return summary.as_dict()


def _print_index(result: dict[str, Any]) -> None:
    table = Table(title=f"rag-pipeline demo ({result['seconds']} s)")
    table.add_column("source")
    for title, _ in _COLUMNS:
        table.add_column(title, justify="right")
    for name, figures in result["per_source"].items():
        table.add_row(name, *(str(figures[key]) for _, key in _COLUMNS))
    Console().print(table)
    stages = Table(title="seconds per stage")
    stages.add_column("stage")
    for name in result["per_source"]:
        stages.add_column(name, justify="right")
    per_source = list(result["per_source"].values())
    for stage in per_source[0]["stage_seconds"] if per_source else []:
        stages.add_row(stage, *(str(s["stage_seconds"].get(stage, 0.0)) for s in per_source))
    Console().print(stages)


def _print_evaluation(evaluation: EvaluationSummary) -> None:
    state = "evaluated" if evaluation.ran else "index unchanged; last report"
    print(f"\nRetrieval evaluation ({state}, {evaluation.seconds:.0f} s) — report: {evaluation.report_dir}")
    for name, table in evaluation.tables.items():
        print(f"\n### {name}\n\n{table}")
    for failure in evaluation.failures:
        print(f"evaluation failure: {failure}")
    if evaluation.checks:
        print("\nchecks: " + ", ".join(f"{k}={'pass' if v else 'FAIL'}" for k, v in evaluation.checks.items()))
