"""``rag-pipeline search``: query the index as a principal from the command line."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rag_pipeline import settings
from rag_pipeline.index.client_store import ClientVectorStore
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames, VectorStore
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.rerank.learned import load_current_reranker
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense import load_dense_encoder


def open_store(data_dir: Path, prefix: str = "rag") -> VectorStore:
    """The demo/pipeline index: the Qdrant server when QDRANT_URL is set, else the embedded engine."""
    names = CollectionNames.with_prefix(prefix)
    url = os.environ.get("QDRANT_URL")
    if url:
        return ClientVectorStore.connect(url=url, api_key=os.environ.get("QDRANT_API_KEY"), names=names)
    folder = data_dir / "qdrant"
    if not (folder / names.children).exists():
        raise SystemExit(f"no index at {folder}: run `rag-pipeline demo` (or materialize the points assets) first")
    return EdgeVectorStore(folder, names)


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


def run(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve() if args.data_dir else settings.data_dir()
    model = os.environ.get("RAG_DENSE_MODEL")
    store = open_store(data_dir)
    try:
        reranker = load_current_reranker(data_dir / "reports" / "reranker")
        retriever = Retriever(
            store,
            dense=(lambda: load_dense_encoder(model)) if model else load_dense_encoder,
            reranker=reranker,
            config=retriever_config(args),
            persistent_cache=EmbeddingCache(data_dir / "embedding_cache.sqlite"),
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
    finally:
        store.close()
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
