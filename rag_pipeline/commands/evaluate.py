"""``rag-pipeline evaluate``: mine eval sets from the data folder's own workspace, then run every arm on them."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path

from rich.console import Console

from rag_pipeline.commands.arguments import add_data_dir, iso_day, positive_int
from rag_pipeline.commands.demo import print_evaluation
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.commands.progress import task_bars
from rag_pipeline.evaluation.mining.mine import DEFAULT_MAX_QUERIES, RUN_AS, MiningReport
from rag_pipeline.runs.evaluation import run_evaluation
from rag_pipeline.runs.mining import NothingToMine, mine_data_folder
from rag_pipeline.settings import Settings


def _day(value: str) -> date:
    return date.fromisoformat(iso_day(value))


def add_parser(sub: argparse._SubParsersAction) -> None:
    evaluate = sub.add_parser(
        "evaluate",
        help="mine eval sets from your own indexed workspace and compare every retrieval arm on them",
        description="Mines questions your workspace already answered — documents that name another (issue keys, "
        "permalinks, page addresses), Jira issue links (duplicates, relates, causes, clones) and chat threads (the "
        "opening message, found from the replies) — each run as its author, judging only what the author may read. "
        "Then runs every arm (vector, bm25, hybrid, reranked, prf) on the mined sets and prints the tables `demo` "
        "prints. The mined sets become the data folder's current ones (reports/mined/sets), which the Dagster "
        "evaluation runs too.",
        epilog="example: rag-pipeline evaluate --data-dir acme --miners links,jira_links --max-queries 300 "
        "--save-eval-set eval_sets/acme",
    )
    add_data_dir(evaluate)
    evaluate.add_argument(
        "--miners",
        default=None,
        help="comma-separated miners (default: every registered one: links, jira_links, "
        "threads, any a source plugin adds, and feedback: readers' judgements where RAG_FEEDBACK_DAYS keeps them)",
    )
    evaluate.add_argument(
        "--max-queries", type=positive_int, default=None,
        help=f"queries kept per source and miner, a sample spread over weeks (default: $RAG_MINED_MAX_QUERIES or "
        f"{DEFAULT_MAX_QUERIES})",
    )  # fmt: skip
    evaluate.add_argument("--since", type=_day, default=None, help="only questions asked on or after this day")
    evaluate.add_argument("--until", type=_day, default=None, help="only questions asked before this day")
    evaluate.add_argument(
        "--save-eval-set", type=Path, default=None, metavar="DIR",
        help="also write the mined sets to DIR as ordinary <name>.jsonl + .meta.json files to review, edit and keep",
    )  # fmt: skip
    evaluate.add_argument(
        "--run-as", choices=RUN_AS, default="authors",
        help="who each mined query searches as: its author, through the principal directory (default; relevance "
        "and leaks as that person), or everyone, for a workspace whose directory knows no memberships (an offline "
        "Jira dump without --jira-directory); such sets are tagged as:everyone",
    )  # fmt: skip
    evaluate.add_argument("--no-eval", action="store_true", help="mine and write the sets only")
    evaluate.add_argument("--json", action="store_true", help="print the mining summary and figures as JSON")
    evaluate.set_defaults(func=run, reads_data_folder=True)


def run(args: argparse.Namespace, settings: Settings) -> int:
    console = Console(stderr=True)
    miners = [m.strip() for m in args.miners.split(",") if m.strip()] if args.miners else None
    if args.since and args.until and args.since >= args.until:
        raise CommandError(f"--since {args.since} is not before --until {args.until}")
    try:
        report, sets = mine_data_folder(
            settings, miners, args.max_queries, args.since, args.until, args.save_eval_set, args.run_as
        )
    except NothingToMine as exc:
        raise CommandError(str(exc)) from exc
    except ValueError as exc:  # an unknown miner
        raise CommandError(f"--miners: {exc}") from exc
    result: dict[str, object] = {"mining": report.summary(), "mined_dir": str(sets.sets_dir)}
    if not args.json:
        print_mining(report, sets.sets_dir, args.save_eval_set)
    if not report.eval_sets:
        if args.json:
            print(json.dumps(result, indent=2))
        print("nothing mined: no query passed the checks (see skipped above)", file=sys.stderr)
        return 1
    if not args.no_eval:
        scoped = settings.model_copy(update={"eval_dir": sets.sets_dir})
        with task_bars(console, disable=args.json) as bars:
            evaluation = run_evaluation(scoped, force=True, on_progress=bars)
        result["evaluation"] = evaluation.as_dict()
        if not args.json:
            print_evaluation(evaluation)
        if evaluation.failures:
            print("; ".join(evaluation.failures), file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    return 1 if "evaluation" in result and result["evaluation"]["failures"] else 0  # type: ignore[index]


def print_mining(report: MiningReport, folder: Path, saved: Path | None) -> None:
    """What was mined, per set and per (miner, source), the languages, and every reason a candidate was skipped."""
    total = sum(len(queries) for _meta, queries in report.eval_sets.values())
    print(
        f"Mined {total} queries from {report.documents} stored documents into {folder}"
        + (f" (and {saved})" if saved else "")
    )
    for name, (_meta, queries) in report.eval_sets.items():
        print(f"  {name}: {len(queries)} queries")
    for (miner, source), kept in sorted(report.kept.items()):
        print(f"    {miner}/{source}: {kept} kept of {report.found[(miner, source)]} found")
    if report.languages:
        print("  languages: " + ", ".join(f"{k} {v}" for k, v in sorted(report.languages.items())))
    for (miner, reason), count in sorted(report.skipped.items()):
        print(f"  skipped {count} ({miner}): {reason}")
    for name, examples in report.examples().items():
        for example in examples:
            print(f"  e.g. [{name}] {str(example['query'])[:100]!r} -> {example['relevant']}")
