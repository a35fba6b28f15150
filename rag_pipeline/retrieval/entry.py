"""The one way a reader gets a :class:`Retriever` over an open index: the CLI's ``search`` and ``bench``, the
evaluation assets and the search service all build it here, so their searches cannot drift apart.

:class:`SearchModels` is what a search loads (the BM25 encoder, the dense model or its loader, the reranker,
the embedding cache); :func:`build_retriever` checks that the open index was written with the same models and
hands back a retriever on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rag_pipeline.index.index_info import check_dense_model, check_sparse_terms
from rag_pipeline.index.store import VectorStore
from rag_pipeline.retrieval.calibration import CalibrationFile
from rag_pipeline.retrieval.query_cache import QueryEmbeddingCache
from rag_pipeline.retrieval.rerank.base import Reranker
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.sparse import Bm25Encoder


@dataclass
class SearchModels:
    """The models a search runs: loaded once by a long-lived reader, per command by the CLI.

    ``dense_model`` is the configured model's name, which the index must have been written with;
    ``dense`` is the encoder, a zero-argument loader (a model that fails to load degrades dense arms to
    BM25), or None (BM25 only)."""

    dense_model: str
    bm25: Bm25Encoder
    dense: DenseEncoder | Callable[[], DenseEncoder] | None = None
    reranker: Reranker | None = None
    cache: EmbeddingCache | None = None
    # A long-lived reader's in-memory query cache, shared by every retriever it builds (one per index open).
    query_cache: QueryEmbeddingCache | None = None
    # Each mode's score as P(relevant), which results carry and ``min_score`` filters on (read again when the
    # evaluation rewrites it).
    calibration: CalibrationFile | None = None


def build_retriever(store: VectorStore, models: SearchModels, config: RetrieverConfig | None = None) -> Retriever:
    """A retriever on ``store`` with ``models``; refuses an index written with another dense model or other
    BM25 terms (:class:`~rag_pipeline.index.index_info.IndexModelMismatch`)."""
    check_dense_model(store, models.dense_model)
    check_sparse_terms(store, models.bm25.terms_id)
    return Retriever(
        store,
        models.bm25,
        dense=models.dense,
        reranker=models.reranker,
        config=config,
        persistent_cache=models.cache,
        query_cache=models.query_cache,
        calibration=models.calibration,
    )
