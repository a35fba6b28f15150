"""``rag-pipeline prune [--dry-run] [--run-days N] [--report-days N]``: delete old finished runs, old evaluation
reports and superseded files of a data folder, keeping everything the current version still reads
(:mod:`rag_pipeline.runs.retention` says what and why); the daily ``retention_schedule`` does the same."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from rag_pipeline.commands.arguments import add_data_dir, non_negative_int
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.settings import Settings

if TYPE_CHECKING:
    from rag_pipeline.runs.retention import RetentionPlan, RetentionResult

# Items listed per kind on the terminal; --json lists them all.
SHOWN = 10


def add_parser(sub: argparse._SubParsersAction) -> None:
    prune = sub.add_parser(
        "prune",
        help="delete old finished runs, old evaluation reports and superseded files (retention)",
        description="Deletes finished Dagster runs (with their event logs) that ended more than --run-days ago, "
        "evaluation reports, reranker versions that are not CURRENT and cached reranker fits older than "
        "--report-days, parquet files of the old (day x container) layout left in a folder already upgraded, and "
        "temporary files of interrupted writes. Kept whatever their age: runs not finished, the run holding the "
        "newest materialization of each partition (so no week turns 'missing'), the sync runs each channel's or "
        "project's watermark comes from, the newest index run of each input file, each eval set's newest report, "
        "and the index, embedding cache, directory and weekly parquet files. Nothing outside the data folder is "
        "touched. Defaults: RAG_RETENTION_RUN_DAYS (30) and RAG_RETENTION_REPORT_DAYS (90); 0 keeps that kind "
        "forever. The daily retention_schedule (RAG_RETENTION_CRON) does the same in the daemon. Exit 0; 2 for a "
        "bad option.",
    )
    prune.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    prune.add_argument(
        "--run-days",
        type=non_negative_int,
        metavar="N",
        default=None,
        help="delete finished runs that ended more than N days ago (default: $RAG_RETENTION_RUN_DAYS or 30; "
        "0: keep every run)",
    )
    prune.add_argument(
        "--report-days",
        type=non_negative_int,
        metavar="N",
        default=None,
        help="delete evaluation reports, old reranker versions and fits older than N days (default: "
        "$RAG_RETENTION_REPORT_DAYS or 90; 0: keep them)",
    )
    add_data_dir(prune)
    prune.add_argument("--json", action="store_true", help="print the plan (and what was deleted) as JSON")
    prune.set_defaults(func=run)


def with_days(settings: Settings, run_days: int | None, report_days: int | None) -> Settings:
    """``settings`` with the retention days the options give (None: the configured ones)."""
    changes = {
        name: value for name, value in (("run_days", run_days), ("report_days", report_days)) if value is not None
    }
    if not changes:
        return settings
    return settings.model_copy(update={"retention": settings.retention.model_copy(update=changes)})


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.runs.execution import runner_instance
    from rag_pipeline.runs.instance import ensure_dagster_home
    from rag_pipeline.runs.retention import apply_retention, plan_retention

    if not settings.data_dir.is_dir():
        raise CommandError(f"no data folder at {settings.data_dir} (--data-dir / RAG_DATA_DIR): nothing to prune")
    settings = with_days(settings, args.run_days, args.report_days)
    ensure_dagster_home(settings)
    with runner_instance() as instance:
        plan = plan_retention(settings, instance)
        result = None if args.dry_run else apply_retention(plan, instance)
    # What was left alone or could not be deleted goes to stderr whatever the format (and into --json's lists).
    for refused in plan.refused:
        print(f"refused (left alone): {refused}", file=sys.stderr)
    for skipped in result.skipped if result is not None else []:
        print(f"skipped: {skipped}", file=sys.stderr)
    if args.json:
        out: dict[str, Any] = {"dry_run": bool(args.dry_run), "plan": plan.as_dict()}
        if result is not None:
            out["result"] = result.as_dict()
        print(json.dumps(out, indent=2))
        return 0
    print_plan(plan, result, sys.stdout)
    return 0


def print_plan(plan: RetentionPlan, result: RetentionResult | None, out: TextIO) -> None:
    """Per kind: the count and bytes, the first :data:`SHOWN` items; then the old runs kept and the total. Plain
    lines, never wrapped: a log to grep."""
    from rag_pipeline.runs.retention import KIND_LABELS, human_bytes

    verb = "would delete" if result is None else "deleted"
    print(
        f"retention of {plan.data_dir}: runs {_older(plan.run_days)}, reports {_older(plan.report_days)}"
        + (" (dry run: nothing is deleted)" if result is None else ""),
        file=out,
    )
    totals = plan.totals() if result is None else result.kinds
    listed: dict[str, list[str]] = {kind: [] for kind in totals}
    for run in plan.runs:
        listed["runs"].append(
            f"{run.run_id}  {run.job_name}  {run.status.lower()}  ended {run.ended_at:%Y-%m-%d %H:%M} "
            f"({run.age_days:.0f} days)  {human_bytes(run.bytes)}"
        )
    for item in plan.paths:
        listed[item.kind].append(f"{item.path}  {human_bytes(item.bytes)}  ({item.reason})")
    for kind, total in totals.items():
        if not total.count:
            continue
        print(f"{kind}: {verb} {total.count} ({human_bytes(total.bytes)}): {KIND_LABELS[kind]}", file=out)
        for line in listed[kind][:SHOWN]:
            print(f"  {line}", file=out)
        if len(listed[kind]) > SHOWN:
            print(f"  ... and {len(listed[kind]) - SHOWN} more (--json lists them all)", file=out)
    if plan.kept_runs:
        print(f"kept {len(plan.kept_runs)} old run(s) the current version still reads:", file=out)
        for kept in plan.kept_runs[:SHOWN]:
            print(f"  {kept.run_id}  {kept.job_name}  ({kept.age_days:.0f} days): {kept.reason}", file=out)
        if len(plan.kept_runs) > SHOWN:
            print(f"  ... and {len(plan.kept_runs) - SHOWN} more", file=out)
    if result is not None:
        print(f"reclaimed {human_bytes(result.bytes_reclaimed)}, {result.runs_deleted} run(s) deleted", file=out)
    elif plan.empty:
        print("nothing to delete", file=out)
    else:
        print(f"would reclaim {human_bytes(plan.bytes)}; run without --dry-run to delete", file=out)


def _older(days: int) -> str:
    return "kept forever (0 days)" if days == 0 else f"older than {days} day{'s' if days != 1 else ''}"
