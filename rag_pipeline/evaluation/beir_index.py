"""A temporary index of a BEIR corpus, built through the pipeline's own chunking, vector and index code."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from rag_pipeline.evaluation.beir import BeirDataset, beir_documents
from rag_pipeline.index.store import VectorStore
from rag_pipeline.stages import documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker, ChunkingConfig
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Tokenizer, token_counts


@dataclass
class BeirIndexReport:
    """What went into the temporary index."""

    documents: int
    parents: int
    children: int
    embeddings_computed: int
    embeddings_cached: int
    bm25_avg_len: float


def corpus_avg_len(dataset: BeirDataset, name: str, tokenizer: Bm25Tokenizer = "word") -> float:
    """Mean document length in BM25 tokens: BM25's own avgdl for a fixed corpus."""
    texts = [d.text for d in beir_documents(dataset, name)]
    return statistics.fmean(token_counts(texts, tokenizer=tokenizer) or [1])


def build_beir_index(
    dataset: BeirDataset,
    name: str,
    store: VectorStore,
    encoder: DenseEncoder,
    bm25: Bm25Encoder,
    chunking: ChunkingConfig,
    cache: EmbeddingCache | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    split_at_model_limit: bool = True,
) -> BeirIndexReport:
    """Chunk, embed (through the embedding cache) and index every corpus document.

    ``split_at_model_limit=False`` keeps children longer than the dense model's input whole: the model
    then embeds their first tokens (as BEIR's dense baselines do) while BM25 sees the whole chunk.
    """
    documents = documents_frame(beir_documents(dataset, name))
    limit = encoder.max_tokens if split_at_model_limit else None
    chunker = Chunker(chunking, encoder.count_tokens, limit)
    report = index_documents_directly(store, documents, chunker, encoder, bm25, cache, on_progress)
    return BeirIndexReport(
        len(documents),
        report.parents,
        report.children,
        report.embeddings.computed,
        report.embeddings.cached,
        bm25.params.avg_len,
    )
