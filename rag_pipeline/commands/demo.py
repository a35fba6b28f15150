"""``rag-pipeline demo``: index the offline sources through every partitioned asset, then evaluate."""

from __future__ import annotations

import argparse
import json
import logging
import warnings

from rag_pipeline.runs.backfill import DEFAULT_BRIDGE_DAYS
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
        type=int,
        default=DEFAULT_BRIDGE_DAYS,
        help="empty days between two stretches that still share one run (default: %(default)s)",
    )
    demo.add_argument("--no-eval", action="store_true", help="skip the retrieval evaluation at the end")
    demo.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from rag_pipeline.runs.backfill import run_backfill

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
            settings,
            bridge_days=args.bridge_days,
            full_refresh=args.full_refresh,
            sources=tuple(args.source),
            on_progress=on_progress,
        )
    result = summary.as_dict()
    evaluation = None
    if not args.no_eval:
        from rag_pipeline.commands.progress import task_bars
        from rag_pipeline.runs.evaluation import run_evaluation

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
    if evaluation is not None:
        state = "evaluated" if evaluation.ran else "index unchanged; last report"
        print(f"\nRetrieval evaluation ({state}, {evaluation.seconds:.0f} s) — report: {evaluation.report_dir}")
        for name, table in evaluation.tables.items():
            print(f"\n### {name}\n\n{table}")
        for failure in evaluation.failures:
            print(f"evaluation failure: {failure}")
        if evaluation.checks:
            print("\nchecks: " + ", ".join(f"{k}={'pass' if v else 'FAIL'}" for k, v in evaluation.checks.items()))
    print(
        f"Dagster instance: {result['dagster_home']}  (open the UI: DAGSTER_HOME={result['dagster_home']} dagster dev)"
    )
    return 0
