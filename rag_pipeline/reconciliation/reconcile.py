"""Applying a reconciliation: documents that vanished at the source leave the index, documents
whose content changed without a newer timestamp (a deleted reply) are rewritten.

A deletion leaves no timestamp, so a rewritten document gets the stored version plus one
microsecond (Slack's ts resolution): newer than what the index holds, older than any real later
activity, so a later sync still wins and a re-run of an old partition still loses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_pipeline.index.store import IndexedDocument, VectorStore
from rag_pipeline.sources.document import Document, epoch_to_datetime
from rag_pipeline.stages import DirectIndexReport, documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense import DenseEncoder
from rag_pipeline.vectors.sparse import Bm25Encoder

VERSION_STEP = 1e-6


@dataclass
class ReconcilePlan:
    """What one container's reconciliation will change."""

    container: str
    remove: list[str] = field(default_factory=list)
    rewrite: list[Document] = field(default_factory=list)
    checked: int = 0


@dataclass
class ReconcileResult:
    """What a reconciliation changed in the index."""

    removed: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    checked: int = 0
    index: DirectIndexReport | None = None


def newer_than_stored(doc: Document, stored: IndexedDocument) -> Document:
    """The document with a version just above the stored one when its own is not newer."""
    if doc.version > stored.version:
        return doc
    version = stored.version + VERSION_STEP
    return doc.model_copy(update={"version": version, "updated": epoch_to_datetime(version)})


@dataclass
class IndexWriters:
    """Everything a rewrite needs to chunk, embed and write documents."""

    chunker: Chunker
    encoder: DenseEncoder
    bm25: Bm25Encoder
    cache: EmbeddingCache | None = None


def apply_plans(store: VectorStore, plans: Sequence[ReconcilePlan], writers: IndexWriters) -> ReconcileResult:
    """Rewrite changed documents (new points before old ones go), then remove vanished ones."""
    result = ReconcileResult(checked=sum(p.checked for p in plans))
    rewrite = [d for p in plans for d in p.rewrite]
    if rewrite:
        result.index = index_documents_directly(
            store, documents_frame(rewrite), writers.chunker, writers.encoder, writers.bm25, writers.cache
        )
        result.rewritten = [d.id for d in rewrite]
    remove = [doc_id for p in plans for doc_id in p.remove]
    if remove:
        for collection in (store.names.children, store.names.parents):
            store.delete_documents(collection, remove)
        result.removed = remove
    return result
