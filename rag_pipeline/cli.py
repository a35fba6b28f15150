"""The ``rag-pipeline`` command."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from pathlib import Path

from rag_pipeline.backfill import DEFAULT_BRIDGE_DAYS
from rag_pipeline.commands import sync as sync_command


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
    evaluation = None
    if not args.no_eval:
        from rag_pipeline.backfill import run_evaluation
        from rag_pipeline.commands.progress import task_bars

        changed = result["runs"] > 0 or args.full_refresh
        with task_bars(console, disable=args.json) as on_eval_progress:
            evaluation = run_evaluation(
                args.data_dir, force=changed, on_progress=on_eval_progress, sources=tuple(args.source)
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
    demo.add_argument("--no-eval", action="store_true", help="skip the retrieval evaluation at the end")
    demo.set_defaults(func=_demo)
    _add_search(sub)
    _add_bench(sub)
    sync_command.add_parser(sub)
    return parser


def _search(args: argparse.Namespace) -> int:
    from rag_pipeline.commands.search import run

    return run(args)


def _bench(args: argparse.Namespace) -> int:
    from rag_pipeline.commands.bench import run

    return run(args)


def _add_search(sub: argparse._SubParsersAction) -> None:
    search = sub.add_parser(
        "search",
        help="search the index as a user (vector, bm25, hybrid or reranked)",
        description="Searches child chunks with the reader's ACL in every query, then returns one result per "
        "document with its best chunk. Without --user/--groups only public documents match; --all-documents "
        "(evaluation only) skips access control.",
    )
    search.add_argument("query")
    search.add_argument("--mode", choices=["vector", "bm25", "hybrid", "reranked"], default="hybrid")
    search.add_argument("--user", default=None, help="reader's user id (e.g. a Slack or Jira account id)")
    search.add_argument("--groups", default="", help="reader's groups, comma-separated (e.g. slack:T0UBUNTU:members)")
    search.add_argument("--all-documents", action="store_true", help="skip access control (evaluation only)")
    search.add_argument("--top-k", type=int, default=10, help="results to return (default: %(default)s)")
    search.add_argument("--source", action="append", choices=["slack", "jira"], help="only this source (repeatable)")
    search.add_argument("--container", action="append", help="only this channel id / project key (repeatable)")
    search.add_argument("--since", default=None, help="documents active on or after this ISO date")
    search.add_argument("--until", default=None, help="documents active before this ISO date")
    search.add_argument("--min-score", type=float, default=None, help="drop results scoring below this")
    search.add_argument("--rrf-k", type=int, default=60, help="RRF constant for hybrid (default: %(default)s)")
    search.add_argument("--fusion", choices=["rrf", "dbsf"], default="rrf", help="hybrid fusion (default: %(default)s)")
    search.add_argument(
        "--rrf-weights", default=None, help="weighted RRF as DENSE,SPARSE weights, e.g. 1,2 (default: equal)"
    )
    search.add_argument("--json", action="store_true", help="print results as JSON")
    search.add_argument("--data-dir", default=None, help="data folder (default: $RAG_DATA_DIR or ./.rag_data)")
    search.set_defaults(func=_search)


def _add_bench(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmark the retrieval arms on eval sets or a BEIR dataset",
        description="Runs every arm on each query, scores document rankings with ranx (nDCG@10, Recall@k, MRR@10, "
        "MAP@100, hit rate) and ragas ID-based context precision/recall, with bootstrap 95%% CIs and paired "
        "randomization tests against the baseline (Holm-corrected). --eval-set uses the demo index; --beir builds "
        "a temporary index of the corpus through the same chunking and vector code. The reranked arm is scored "
        "by a learned reranker that never saw the query (BEIR: trained on the train split; eval sets: k-fold "
        "cross-fitting).",
    )
    target = bench.add_mutually_exclusive_group(required=True)
    target.add_argument("--eval-set", action="append", type=Path, help="project-format eval set (repeatable)")
    target.add_argument("--beir", type=Path, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    bench.add_argument(
        "--arms",
        nargs="+",
        choices=["vector", "bm25", "hybrid", "reranked"],
        default=["vector", "bm25", "hybrid", "reranked"],
    )
    bench.add_argument("--baseline", default="bm25", help="arm the others are tested against (default: %(default)s)")
    bench.add_argument(
        "--extra-reranker",
        action="append",
        help="also report a reranked arm with this reranker: 'fixed' or 'cross-encoder:<folder or hub name>'",
    )
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.add_argument("--out", type=Path, help="write report.md, summary.json, per_query.parquet and PNG plots here")
    bench.add_argument("--folds", type=int, default=5, help="cross-fitting folds on eval sets (default: %(default)s)")
    bench.add_argument("--rrf-k", type=int, default=60, help="RRF constant (default: %(default)s)")
    bench.add_argument("--fusion", choices=["rrf", "dbsf"], default="rrf", help="hybrid fusion (default: %(default)s)")
    bench.add_argument(
        "--rrf-weights", default=None, help="weighted RRF as DENSE,SPARSE weights, e.g. 1,2 (default: equal)"
    )
    bench.add_argument("--rerank-depth", type=int, default=50, help="hybrid documents reranked (default: %(default)s)")
    beir = bench.add_argument_group("BEIR options")
    beir.add_argument("--split", default="test", help="split scored (default: %(default)s)")
    beir.add_argument("--train-split", default="train", help="split the reranker learns from (default: %(default)s)")
    beir.add_argument("--bm25-k1", type=float, default=1.2, help="BM25 k1 (default: %(default)s)")
    beir.add_argument("--bm25-b", type=float, default=0.75, help="BM25 b (default: %(default)s)")
    beir.add_argument(
        "--bm25-avg-len", default="auto", help="BM25 average length in tokens, or 'auto' = corpus mean (default)"
    )
    beir.add_argument("--parent-tokens", type=int, default=2000, help="parent chunk size (default: %(default)s)")
    beir.add_argument("--child-tokens", type=int, default=400, help="child chunk size (default: %(default)s)")
    beir.add_argument(
        "--truncate-at-model-limit",
        action="store_true",
        help="keep children longer than the dense model's input whole (the model embeds their start, BM25 sees "
        "all of it) instead of splitting them to fit",
    )
    bench.add_argument("--data-dir", default=None, help="data folder: index and embedding cache (default: ./.rag_data)")
    bench.set_defaults(func=_bench)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "source", None) is None:
        args.source = ["slack", "jira"]
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
