"""The composition root: from :class:`~rag_pipeline.settings.Settings`, the index location, the opened index, the
models (dense encoder, BM25 encoder, reranker), the search models, the retriever and the search service, for the
commands, the service, the evaluation's callers and ``bench/`` alike. Settings stay configuration only: every
factory of what they name is here.

It imports neither the command layer nor Dagster: the Dagster resources describe the same index from their own
config (``defs/chain/resources.py``), and both end in :func:`~rag_pipeline.index.opening.open_vector_store` and
:func:`~rag_pipeline.retrieval.entry.build_retriever`, the one place a ``Retriever`` is assembled.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.index.index_info import check_dense_model, check_sparse_terms
from rag_pipeline.index.opening import StoreLocation, open_vector_store
from rag_pipeline.index.store import CollectionNames, DenseSearch, VectorStore
from rag_pipeline.index.store_lock import process_label
from rag_pipeline.retrieval.calibration import CalibrationFile
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.query_cache import QueryEmbeddingCache
from rag_pipeline.retrieval.rerank.base import Reranker
from rag_pipeline.retrieval.rerank.choice import configured_reranker
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.retrieval.tool_outcomes import ToolOutcomes
from rag_pipeline.retrieval.tool_search import ToolSearch, tool_search_config, tool_search_settings
from rag_pipeline.serving.access import AccessQueries, AccessRefused
from rag_pipeline.serving.active_tools import ActiveSetLimits, ActiveToolSets
from rag_pipeline.serving.feedback import FeedbackStore
from rag_pipeline.serving.one_shot import OneShotIndex
from rag_pipeline.serving.request_audit import RequestAudit
from rag_pipeline.serving.result_cache import ResultCache
from rag_pipeline.serving.service import SearchService
from rag_pipeline.serving.shared_cache import shared_redis
from rag_pipeline.serving.tracing import Tracing
from rag_pipeline.settings import Settings, secret
from rag_pipeline.sources.registry import tool_catalog_source
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.dense.load import load_dense_encoder
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params


class IndexMissing(ValueError):
    """No index where the settings say it is (nothing was indexed yet); the message says what to run."""


def dense_encoder_of(settings: Settings) -> DenseEncoder:
    """The configured dense model (RAG_DENSE_MODEL) on the configured backend and device (cached per process)."""
    return load_dense_encoder(
        settings.dense_model,
        settings.dense_backend,
        settings.dense_device,
        settings.model_cache,
        trust_remote_code=settings.dense_trust_remote_code,
    )


def reranker_of(settings: Settings) -> Reranker | None:
    """The reranker readers' ``reranked`` searches use (RAG_RERANKER); None for ``none``."""
    paths = settings.paths
    return configured_reranker(
        settings.reranker, paths.reranker, settings.bm25_tokenizer, settings.llm_rerank_model, paths.llm_grades
    )


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


def served_config(settings: Settings) -> RetrieverConfig:
    """The searches' settings a reader of the configured index gets (the service, ``search``, ``ask``): the sparse
    query, the learned fusions of the index's language, the large-index prefetch."""
    return RetrieverConfig.chosen(settings.sparse_query, settings.learned_fusion, settings.index_language)


def retriever(store: VectorStore, models: SearchModels, config: RetrieverConfig | None = None) -> Retriever:
    """The retriever over an opened index: :func:`~rag_pipeline.retrieval.entry.build_retriever`."""
    return build_retriever(store, models, config)


def search_service(
    settings: Settings, location: StoreLocation | None = None, wait_seconds: float | None = None, **kwargs: Any
) -> SearchService:
    """The search service with the configured models, loaded now (seconds), and the CLI's search defaults; a query
    waits for a writer up to ``wait_seconds`` (default: the settings' store wait). ``kwargs`` replace any of the
    service's parts (tests hand their own audit log or caches)."""
    encoder = dense_encoder_of(settings)
    encoder.encode_queries(["warm-up"])  # compile/allocate before the first caller pays for it
    # One query-embedding cache for the service's life (kept across reopenings): repeated and paged
    # queries skip the model. In memory only: query text is never written to the data folder.
    models = search_models(
        settings, dense=encoder, reranker=reranker_of(settings), query_cache=QueryEmbeddingCache(encoder)
    )
    config = served_config(settings)
    wait = float(settings.store_wait_seconds if wait_seconds is None else wait_seconds)
    serve, paths = settings.serve, settings.paths
    kwargs.setdefault("tracing", Tracing(serve.otlp_endpoint, serve.otel_service_name))
    kwargs.setdefault("cache_entries", serve.cache_entries)
    kwargs.setdefault("default_min_score", settings.min_score)
    kwargs.setdefault("cache_seconds", float(serve.cache_seconds))
    if serve.cache_redis_url is not None and "shared_cache" not in kwargs:
        kwargs["shared_cache"] = shared_redis(serve.cache_redis_url.get_secret_value())
    tools = tool_search_settings(settings.source(tool_catalog_source()))
    kwargs.setdefault(
        "tool_search", ToolSearch(tool_search_config(tools), ResultCache(tools.cache_entries, tools.cache_seconds))
    )
    kwargs.setdefault("tool_outcomes", ToolOutcomes(paths.tool_outcomes))
    kwargs.setdefault("active_tools", ActiveToolSets(ActiveSetLimits.of(tools)))
    if serve.feedback_days and "feedback" not in kwargs:
        kwargs["feedback"] = FeedbackStore(paths.feedback, serve.feedback_days)
    if serve.audit_days and "audit" not in kwargs:
        kwargs["audit"] = RequestAudit(paths.request_audit, serve.audit_days)
    return SearchService(location or store_location(settings), models, config, wait_seconds=wait, **kwargs)


def one_shot_index(
    settings: Settings,
    *,
    dense: DenseEncoder | Callable[[], DenseEncoder] | None = None,
    reranker: Reranker | None = None,
    cache: EmbeddingCache | None = None,
    config: RetrieverConfig | None = None,
) -> OneShotIndex:
    """The search use cases on the configured index opened for each call (the CLI's), with the models given (load
    them before: the embedded index admits one process at a time) and the service's search defaults unless
    ``config`` says otherwise."""
    chosen = config or served_config(settings)
    models = search_models(settings, dense, reranker, cache)
    return OneShotIndex(lambda: open_index(settings), models, chosen, default_min_score=settings.min_score)


def access_queries(settings: Settings) -> AccessQueries:
    """``whois`` and ``explain`` over the configured directory and links; a document's ACL is read from the index
    opened for that question alone (``whois`` never asks, so it never waits for a service holding the index)."""
    directory = settings.paths.directory
    if not DirectoryStore(directory).exists():
        raise AccessRefused(
            404, "person", f"no directory at {directory}: run `rag-pipeline index` (or `sync`, or `directory`) first"
        )
    return AccessQueries(directory, settings.identity_links_file, one_shot_index(settings).document_acl)
