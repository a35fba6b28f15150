"""``rag-pipeline search``: query the index as a principal from the command line."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager

from rag_pipeline.definitions import qdrant_resource
from rag_pipeline.index.index_info import IndexModelMismatch, check_dense_model
from rag_pipeline.index.store import CollectionNames, VectorStore
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.rerank.learned import load_current_reranker
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense import load_dense_encoder


@contextmanager
def open_index(settings: Settings) -> Iterator[VectorStore]:
    """The pipeline's index, opened exactly as the Dagster steps open it (same engine, prefix, shards),
    for as long as the block runs; refuses a dense model other than the one the index was built with."""
    if not settings.qdrant.url:
        names = CollectionNames.with_prefix(settings.qdrant.collection_prefix)
        if not (settings.paths.qdrant / names.children).exists():
            raise SystemExit(
                f"no index at {settings.paths.qdrant}: run `rag-pipeline demo` (or materialize the points assets) first"
            )
    # Outside a run the API key is still an unresolved EnvVar; initializing resolves it.
    with qdrant_resource(settings).process_config_and_initialize().open() as store:
        try:
            check_dense_model(store, settings.dense_model)
        except IndexModelMismatch as exc:
            raise SystemExit(f"error: {exc}") from None
        yield store


def retriever_config(args: argparse.Namespace) -> RetrieverConfig:
    """Fusion and depth options shared by ``search`` and ``bench``."""
    weights = None
    if args.rrf_weights:
        try:
            dense, sparse = (float(w) for w in args.rrf_weights.split(","))
        except ValueError:
            raise SystemExit(f"--rrf-weights must be two numbers DENSE,SPARSE, got {args.rrf_weights!r}") from None
        weights = (dense, sparse)
    return RetrieverConfig(
        fusion_method=args.fusion,
        rrf_k=args.rrf_k,
        rrf_weights=weights,
        rerank_depth=getattr(args, "rerank_depth", 50),
    )


def principal_from_args(args: argparse.Namespace) -> Principal:
    groups = tuple(g for g in (args.groups or "").split(",") if g)
    if args.all_documents:
        if args.user or groups:
            raise SystemExit("--all-documents skips access control; it cannot be combined with --user/--groups")
        return Principal.all_documents_for_evaluation()
    return Principal(user_id=args.user, groups=groups)


def run(args: argparse.Namespace, settings: Settings) -> int:
    paths = settings.paths
    with open_index(settings) as store:
        reranker = load_current_reranker(paths.reranker)
        retriever = Retriever(
            store,
            dense=lambda: load_dense_encoder(settings.dense_model),
            reranker=reranker,
            config=retriever_config(args),
            persistent_cache=EmbeddingCache(paths.embedding_cache),
        )
        response = retriever.search(
            args.query,
            args.mode,
            principal_from_args(args),
            top_k=args.top_k,
            sources=args.source,
            containers=args.container,
            updated_from=args.since,
            updated_to=args.until,
            min_score=args.min_score,
        )
    if args.json:
        print(
            json.dumps(
                {
                    "query": args.query,
                    "mode": response.mode,
                    "requested_mode": response.requested_mode,
                    "reranker": reranker.name if response.mode == "reranked" else None,
                    "warnings": response.warnings,
                    "milliseconds": {k: round(v * 1000, 2) for k, v in response.seconds.items()},
                    "results": [r.to_dict() for r in response.results],
                },
                indent=2,
            )
        )
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for warning in response.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    title = f"{response.mode} · {round(response.seconds.get('total', 0) * 1000, 1)} ms"
    if response.mode == "reranked":
        title += f" · {reranker.name}"
    table = Table(title=title, show_lines=True)
    for column in ("#", "score", "document", "title / best chunk"):
        table.add_column(column, overflow="fold")
    for i, r in enumerate(response.results, start=1):
        snippet = " ".join(r.child_text.split())[:240]
        table.add_row(str(i), f"{r.score:.4f}", f"{r.document_id}\n{r.url or ''}", f"[bold]{r.title}[/]\n{snippet}")
    console.print(table)
    if not response.results:
        console.print("no results (the principal may not be allowed to read any match; try --groups)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
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
    search.set_defaults(func=run)
