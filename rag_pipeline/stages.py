"""The pipeline's stages as DataFrame-in, DataFrame-out functions (no orchestration here).

Dagster assets and the CLI call these; every frame may hold many partitions at once, so a
backfill embeds and writes in large batches instead of once per partition.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rag_pipeline.index.index_info import record_written
from rag_pipeline.index.store import StorePoint, VectorStore
from rag_pipeline.index.writer import BELONGS_TO, FAMILY, DocumentPoints, WriteReport, write_documents
from rag_pipeline.sources import document
from rag_pipeline.sources.document import DOCUMENT_COLUMNS, Document
from rag_pipeline.sources.registry import document_payload
from rag_pipeline.text.chunking import Chunker, chunk_id
from rag_pipeline.vectors.cache import CacheStats, EmbeddingCache, embed_with_cache, query_side
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.sparse import THREAD_AVG_LEN, Bm25Encoder, SparseVector, scores_whole_threads

PARENT_COLUMNS = ("chunk_id", "document_id", "chunk_index", "text", "token_start", "token_end", "token_count")
CHILD_COLUMNS = (*PARENT_COLUMNS, "parent_id", "model_tokens")
DENSE_COLUMNS = ("chunk_id", "document_id", "model", "vector")
SPARSE_COLUMNS = ("chunk_id", "document_id", "indices", "values")


def documents_frame(documents: Sequence[Document]) -> pd.DataFrame:
    """Documents as rows (see :meth:`Document.to_record`)."""
    return pd.DataFrame([d.to_record() for d in documents], columns=list(DOCUMENT_COLUMNS))


def chunk_documents(documents: pd.DataFrame, chunker: Chunker) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Parent and child chunk frames for every document row."""
    parents: list[tuple[object, ...]] = []
    children: list[tuple[object, ...]] = []
    for doc_id, text in zip(documents["document_id"], documents["text"], strict=True):
        doc_parents, doc_children = chunker.split(doc_id, text)
        parents.extend((c.id, doc_id, c.index, c.text, c.token_start, c.token_end, c.token_count) for c in doc_parents)
        children.extend(
            (c.id, doc_id, c.index, c.text, c.token_start, c.token_end, c.token_count, c.parent_id, c.model_tokens)
            for c in doc_children
        )
    return (
        pd.DataFrame(parents, columns=list(PARENT_COLUMNS)),
        pd.DataFrame(children, columns=list(CHILD_COLUMNS)).astype({"model_tokens": "Int64"}),
    )


def embed_children(
    children: pd.DataFrame,
    encoder: DenseEncoder,
    cache: EmbeddingCache | None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[pd.DataFrame, CacheStats]:
    """Dense vectors of child chunks, from the cache where the text was embedded before."""
    vectors, stats = embed_with_cache(
        list(children["text"]), encoder.model_id, encoder.encode_documents, cache, on_progress=on_progress
    )
    return _dense_frame(list(children["chunk_id"]), children["document_id"], encoder.model_id, vectors), stats


def _dense_frame(ids: list[str], document_ids: pd.Series, model: str, vectors: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "chunk_id": ids,
            "document_id": document_ids.to_numpy(),
            "model": model,
            "vector": list(vectors) if len(ids) else [],
        },
        columns=list(DENSE_COLUMNS),
    )


def title_vector_id(document_id: str) -> str:
    """The dense frame's row id for a document's title vector (never a chunk's id)."""
    return chunk_id(document_id, "title", 0)


def embed_titles(
    documents: pd.DataFrame,
    encoder: DenseEncoder,
    cache: EmbeddingCache | None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[pd.DataFrame, CacheStats]:
    """Dense vectors of the documents' titles (rows of the dense frame, ids from :func:`title_vector_id`).

    Titles are encoded on the query side: a title is matched against a query or a query's title line, a
    symmetric task, and the query cache's key means a title already searched for is not encoded again.
    Documents without a title get no row.
    """
    titled = documents[documents["title"].fillna("").str.strip() != ""]
    vectors, stats = embed_with_cache(
        list(titled["title"]), query_side(encoder.model_id), encoder.encode_queries, cache, on_progress=on_progress
    )
    ids = [title_vector_id(d) for d in titled["document_id"]]
    return _dense_frame(ids, titled["document_id"], encoder.model_id, vectors), stats


def sparse_children(
    children: pd.DataFrame, encoder: Bm25Encoder, parent_texts: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """BM25 term-weight vectors of child chunks; with ``parent_texts`` (parent chunk id -> text) each child carries
    its parent's vector (whole-thread scoring), computed once per parent."""
    if parent_texts is None:
        vectors = encoder.encode_documents(list(children["text"]))
    else:
        parent_ids = list(dict.fromkeys(children["parent_id"]))
        texts = [parent_texts.get(p) for p in parent_ids]
        missing = [p for p, t in zip(parent_ids, texts, strict=True) if t is None]
        if missing:
            raise ValueError(f"{len(missing)} child chunks' parents are not among the parent chunks: {missing[0]}")
        by_parent = dict(zip(parent_ids, encoder.encode_documents([str(t) for t in texts]), strict=True))
        vectors = [by_parent[p] for p in children["parent_id"]]
    return pd.DataFrame(
        {
            "chunk_id": children["chunk_id"].to_numpy(),
            "document_id": children["document_id"].to_numpy(),
            "indices": [np.asarray(v.indices, dtype=np.int64) for v in vectors],
            "values": [np.asarray(v.values, dtype=np.float32) for v in vectors],
        },
        columns=list(SPARSE_COLUMNS),
    )


@dataclass
class IndexInputs:
    """Frames the index stage reads (all for the same set of documents)."""

    documents: pd.DataFrame
    parents: pd.DataFrame
    children: pd.DataFrame
    dense: pd.DataFrame
    sparse: pd.DataFrame


def _rows_by_document(frame: pd.DataFrame) -> dict[str, list[Any]]:
    """A frame's rows as namedtuples (pandas types their fields as any scalar; the columns say what they hold), by
    ``document_id``, in frame order. One pass over the frame: a ``groupby`` and a frame per document spent ~80 % of
    the index stage's time in pandas (measured at 1,000 documents: 35 of 42 s, bench/search_million.py)."""
    grouped: dict[str, list[Any]] = {}
    for row in frame.itertuples(index=False):
        grouped.setdefault(str(row.document_id), []).append(row)
    return grouped


def document_points(inputs: IndexInputs) -> list[DocumentPoints]:
    """Build every document's parent and child points with their payloads."""
    dense = dict(zip(inputs.dense["chunk_id"], inputs.dense["vector"], strict=True))
    sparse = {
        cid: SparseVector([int(i) for i in idx], [float(v) for v in val])
        for cid, idx, val in zip(
            inputs.sparse["chunk_id"], inputs.sparse["indices"], inputs.sparse["values"], strict=True
        )
    }
    parents_by_doc = _rows_by_document(inputs.parents)
    children_by_doc = _rows_by_document(inputs.children)
    out: list[DocumentPoints] = []
    for doc in inputs.documents.to_dict("records"):
        doc_id = doc["document_id"]
        metadata = _metadata(doc.get("metadata"))
        family = family_fields(metadata)
        base = {
            "document_id": doc_id,
            "source": doc["source"],
            "container": doc["container"],
            "title": doc["title"],
            # A source may leave the url out (None): pandas reads a missing one back as NaN, which no payload holds.
            "url": doc["url"] if isinstance(doc["url"], str) else None,
            "acl": json.loads(doc["acl"]),
            "authors": _authors(doc.get("authors")),
            "created": doc["created"],
            "updated": doc["updated"],
            "version": float(doc["version"]),
            "content_hash": doc["content_hash"],
            # Fields only some sources have (Jira: resolution, links), from the source's own payload hook.
            **document_payload(doc["source"], metadata),
            **family,
        }
        parents = [
            StorePoint(
                id=r.chunk_id, payload={**base, "level": "parent", "chunk_index": int(r.chunk_index), "text": r.text}
            )
            for r in parents_by_doc.get(doc_id, ())
        ]
        children: list[StorePoint] = []
        # Only the first child carries the title: one title point per document.
        title = dense.get(title_vector_id(doc_id))
        for r in children_by_doc.get(doc_id, ()):
            if r.chunk_id not in dense or r.chunk_id not in sparse:
                kind = "dense" if r.chunk_id not in dense else "sparse"
                raise ValueError(f"child chunk {r.chunk_id} of {doc_id} has no {kind} vector")
            children.append(
                StorePoint(
                    id=r.chunk_id,
                    payload={
                        **base,
                        "level": "child",
                        "chunk_index": int(r.chunk_index),
                        "parent_id": r.parent_id,
                        "text": r.text,
                    },
                    dense=dense[r.chunk_id],
                    sparse=sparse[r.chunk_id],
                    title=None if children else title,
                )
            )
        out.append(
            DocumentPoints(
                doc_id,
                float(doc["version"]),
                parents,
                children,
                belongs_to=family.get(BELONGS_TO),
                family=tuple(family.get(FAMILY, ())),
            )
        )
    return out


def family_fields(metadata: dict[str, Any]) -> dict[str, Any]:
    """The payload fields tying a document to its family (absent for the many documents without one): a
    restricted Jira comment names the issue it ``belongs_to``; the issue lists its ``family`` of such comments, so
    a rewrite of the issue removes the comments it no longer has."""
    out: dict[str, Any] = {}
    if metadata.get(document.BELONGS_TO):
        out[BELONGS_TO] = str(metadata[document.BELONGS_TO])
    if metadata.get(document.FAMILY):
        out[FAMILY] = [str(member) for member in metadata[document.FAMILY]]
    return out


def index_documents(store: VectorStore, inputs: IndexInputs, dense_dimension: int) -> WriteReport:
    """Write the documents' points to the store (creating collections on first use)."""
    store.create_collections(dense_dimension)
    report = write_documents(store, document_points(inputs))
    record_written(store)
    return report


@dataclass
class DirectIndexReport:
    """What :func:`index_documents_directly` wrote."""

    write: WriteReport
    embeddings: CacheStats
    parents: int
    children: int


def index_documents_directly(
    store: VectorStore,
    documents: pd.DataFrame,
    chunker: Chunker,
    encoder: DenseEncoder,
    bm25: Bm25Encoder,
    cache: EmbeddingCache | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> DirectIndexReport:
    """Every stage in one call, for writes outside the partitioned assets (a temporary benchmark
    index, documents rewritten by reconciliation)."""
    parents, children = chunk_documents(documents, chunker)
    dense, stats = embed_children(children, encoder, cache, on_progress=on_progress)
    titles, title_stats = embed_titles(documents, encoder, cache)
    stats = CacheStats(stats.cached + title_stats.cached, stats.computed + title_stats.computed)
    dense = pd.concat([dense, titles], ignore_index=True) if len(titles) else dense
    sparse = sparse_vectors_of(documents, parents, children, bm25)
    report = index_documents(store, IndexInputs(documents, parents, children, dense, sparse), encoder.dimension)
    return DirectIndexReport(report, stats, len(parents), len(children))


def sparse_vectors_of(
    documents: pd.DataFrame, parents: pd.DataFrame, children: pd.DataFrame, bm25: Bm25Encoder
) -> pd.DataFrame:
    """The children's BM25 vectors as the chain's sparse asset writes them: per child, or, for a source whose threads
    this tokenizer scores whole (CJK chat), each child its parent's vector with the threads' length prior. A write
    outside the chain (a reconciliation rewrite, a mined set's masked copy) must score as the chain's own points."""
    if children.empty:
        return sparse_children(children, bm25)
    sources = dict(zip(documents["document_id"], documents["source"], strict=True))
    whole = children["document_id"].map(lambda d: scores_whole_threads(bm25.params.tokenizer, sources.get(d, "")))
    frames = []
    if (~whole).any():
        frames.append(sparse_children(children[~whole], bm25))
    if whole.any():
        thread_encoder = Bm25Encoder(bm25.params.model_copy(update={"avg_len": THREAD_AVG_LEN}))
        texts = dict(zip(parents["chunk_id"], parents["text"], strict=True))
        frames.append(sparse_children(children[whole], thread_encoder, texts))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _authors(value: str | None) -> list[str]:
    """The document's authors (a JSON list in the documents frame; missing in frames written before the column)."""
    return [str(a) for a in json.loads(value)] if isinstance(value, str) and value else []


def _metadata(value: str | None) -> dict[str, Any]:
    """A document's source-specific fields (a JSON object in the documents frame; may be missing or empty)."""
    return dict(json.loads(value)) if isinstance(value, str) and value else {}
