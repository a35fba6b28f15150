"""``rag-pipeline demo``: ``index`` on the bundled data (or the configured exports), then the evaluation."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from rich.console import Console

from rag_pipeline.commands.index import (
    add_common_arguments,
    check_paths,
    index_sources,
    language_settings,
    print_summary,
    step_progress,
)
from rag_pipeline.commands.progress import task_bars
from rag_pipeline.commands.tables import print_evaluation_table
from rag_pipeline.runs.evaluation import EvaluationSummary, run_evaluation
from rag_pipeline.runs.skipped import print_skipped
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.progress import ProgressUpdate


def add_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser(
        "demo",
        help="index the bundled Slack export and Jira dump through every partitioned asset, then evaluate",
        description="`rag-pipeline index` on the bundled data (or RAG_SLACK_EXPORT / RAG_JIRA_DUMP), then the "
        "retrieval evaluation on the bundled eval sets. Registers the data's channels/projects as partitions and "
        "materializes every week of their history (in-process, in batches of weeks of at most "
        "RAG_BACKFILL_BATCH_DOCUMENTS documents, one run each). "
        "Re-running skips stretches already indexed from the same source files; --full-refresh recomputes them "
        "(embeddings then come from the cache).",
    )
    add_common_arguments(demo)
    demo.add_argument("--no-eval", action="store_true", help="skip the retrieval evaluation at the end")
    demo.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    console = Console(stderr=True)
    check_paths(settings, args.source, options=False)
    # On stdout, never wrapped, before the summary: stderr stays progress and the one error line of a failure.
    say = (lambda text: None) if args.json else (lambda text: print(text, flush=True))
    say("Indexing the data through every partitioned asset (read, chunk, embed, write to Qdrant)…")
    result = index_sources(args, settings, console, title="rag-pipeline demo", command="demo")
    settings = language_settings(args, settings)  # the models the index was just written with
    evaluation = None
    if not args.no_eval:
        changed = result["runs"] > 0 or args.full_refresh

        def announce(eval_sets: int, arms: int) -> None:
            say(f"Evaluating {arms} arms on {eval_sets} eval sets (progress per eval set and arm below; the reranked "
                "arm first collects its training data and trains its cross-fitted rerankers)…")  # fmt: skip

        with task_bars(console, disable=args.json) as bars, step_progress(eval_progress(console, bars, args.json)):
            evaluation = run_evaluation(
                settings, force=changed, on_progress=bars, sources=tuple(args.source), on_start=announce, mine=True
            )
        result["evaluation"] = {"ran": evaluation.ran, **evaluation.as_dict()}
    if args.json:
        print(json.dumps(result, indent=2))
        print_skipped(result["skipped"], sys.stderr)  # stdout stays one JSON document
        return 0
    print_summary(result, "rag-pipeline demo")
    print_skipped(result["skipped"], sys.stderr)
    if evaluation is not None:
        print_evaluation(evaluation)
    home = result["dagster_home"]
    print(f"Dagster instance: {home}  (open the UI: DAGSTER_HOME={home} dagster dev)")
    return 0


def eval_progress(
    console: Console, bars: Callable[[str, int, int], None], quiet: bool
) -> Callable[[ProgressUpdate], None]:
    """The evaluation steps' own reports (each eval set's phases): a bar with rate and ETA on a terminal; in a
    log, one line per finished phase (with its rate), so a five-minute evaluation is never silent."""

    def on_update(update: ProgressUpdate) -> None:
        if quiet:
            return
        if console.is_terminal:
            bars(update.what, update.done, update.total)
        elif update.done >= update.total:
            console.print(update.line(), highlight=False)

    return on_update


def print_evaluation(evaluation: EvaluationSummary, console: Console | None = None) -> None:
    """Per eval set, its table: as rich tables the terminal's width holds (:mod:`rag_pipeline.commands.tables`);
    the report's markdown in a log or a pipe."""
    console = console or Console()
    state = "evaluated" if evaluation.ran else "index unchanged; last report"
    print(f"\nRetrieval evaluation ({state}, {evaluation.seconds:.0f} s) — report: {evaluation.report_dir}")
    for name, table in evaluation.tables.items():
        if console.is_terminal and name in evaluation.summaries:
            console.print(f"\n### {name}\n", markup=False, highlight=False)
            print_evaluation_table(evaluation.summaries[name], console)
        else:
            print(f"\n### {name}\n\n{table}")
    for failure in evaluation.failures:
        print(f"evaluation failure: {failure}")
    if evaluation.checks:
        print("\nchecks: " + ", ".join(f"{k}={'pass' if v else 'FAIL'}" for k, v in evaluation.checks.items()))
