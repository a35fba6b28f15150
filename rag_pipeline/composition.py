"""The composition root: from :class:`~rag_pipeline.settings.Settings`, the index location, the opened index, the
BM25 encoder, the search models and the retriever, for the commands, the service, the evaluation's callers and
``bench/`` alike.

It imports neither the command layer nor Dagster: the Dagster resources describe the same index from their own
config (``defs/chain/resources.py``), and both end in :func:`~rag_pipeline.index.opening.open_vector_store` and
:func:`~rag_pipeline.retrieval.entry.build_retriever`, the one place a ``Retriever`` is assembled.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rag_pipeline.index.index_info import check_dense_model, check_sparse_terms
from rag_pipeline.index.opening import StoreLocation, open_vector_store
from rag_pipeline.index.store import CollectionNames, DenseSearch, VectorStore
from rag_pipeline.index.store_lock import process_label
from rag_pipeline.retrieval.calibration import CalibrationFile
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.query_cache import QueryEmbeddingCache
from rag_pipeline.retrieval.rerank.base import Reranker
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.settings import Settings, secret
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params


class IndexMissing(ValueError):
    """No index where the settings say it is (nothing was indexed yet); the message says what to run."""


def bm25_encoder(settings: Settings) -> Bm25Encoder:
    """The query-side BM25 encoder of the configured terms (RAG_BM25_TOKENIZER), as the index's writes use."""
    return Bm25Encoder(Bm25Params(tokenizer=settings.bm25_tokenizer))


def store_location(settings: Settings) -> StoreLocation:
    """Where the configured index is (QDRANT_URL, else the embedded folder), its API key read now."""
    q = settings.qdrant
    return StoreLocation(
        path=settings.paths.qdrant,
        url=q.url,
        api_key=secret("QDRANT_API_KEY") if q.api_key_set else None,
        names=CollectionNames.with_prefix(q.collection_prefix),
        shard_number=q.shards,
        replication_factor=q.replicas,
        dense_search=DenseSearch(exact=q.exact_dense, hnsw_ef=q.hnsw_ef, m=q.hnsw_m, ef_construct=q.hnsw_ef_construct),
        wait_seconds=settings.store_wait_seconds,
    )


def _print_wait(message: str) -> None:
    # stderr, so that `--json` output on stdout stays one JSON document.
    print(message, file=sys.stderr, flush=True)


@contextmanager
def open_index(settings: Settings, on_wait: Callable[[str], None] = _print_wait) -> Iterator[VectorStore]:
    """The pipeline's index, opened exactly as the Dagster steps open it (same engine, prefix, shards), for as long
    as the block runs; refuses a dense model or BM25 terms other than those the index was built with.

    The embedded index admits one process at a time: while a pipeline step or another search holds it, this waits
    (up to RAG_STORE_WAIT_SECONDS, reporting on ``on_wait``), then fails naming the holder. Keep the block to the
    queries themselves."""
    if not settings.qdrant.url and not settings.has_embedded_index():
        raise IndexMissing(
            f"no index at {settings.paths.qdrant}: run `rag-pipeline demo` (or materialize the points assets) first"
        )
    store = open_vector_store(store_location(settings), on_wait=on_wait, label=process_label())
    try:
        check_dense_model(store, settings.dense_model)
        check_sparse_terms(store, bm25_encoder(settings).terms_id)
        yield store
    finally:
        store.close()


def search_models(
    settings: Settings,
    dense: DenseEncoder | Callable[[], DenseEncoder] | None = None,
    reranker: Reranker | None = None,
    cache: EmbeddingCache | None = None,
    query_cache: QueryEmbeddingCache | None = None,
) -> SearchModels:
    """The models a search over the configured index runs (its dense model's name, BM25 terms, calibration);
    a long-lived reader passes its in-memory ``query_cache``."""
    return SearchModels(
        settings.dense_model,
        bm25_encoder(settings),
        dense=dense,
        reranker=reranker,
        cache=cache,
        query_cache=query_cache,
        calibration=CalibrationFile(settings.paths.calibration),
    )


def retriever(store: VectorStore, models: SearchModels, config: RetrieverConfig | None = None) -> Retriever:
    """The retriever over an opened index: :func:`~rag_pipeline.retrieval.entry.build_retriever`."""
    return build_retriever(store, models, config)
