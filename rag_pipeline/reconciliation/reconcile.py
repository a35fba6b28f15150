"""Applying a reconciliation: documents that vanished at the source leave the index, documents
whose content changed without a newer timestamp (a deleted reply) are rewritten, and documents whose
readers changed (a member added to or removed from a private channel) get the new ACL in place: the
``acl`` payload of their points is replaced, nothing is re-chunked or re-embedded.

A deletion leaves no timestamp, so a rewritten document gets the stored version plus one
microsecond (Slack's ts resolution): newer than what the index holds, older than any real later
activity, so a later sync still wins and a re-run of an old partition still loses.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rag_pipeline.index.index_info import record_written
from rag_pipeline.index.store import IndexedAcl, IndexedDocument, VectorStore
from rag_pipeline.sources.document import Acl, Document, epoch_to_datetime
from rag_pipeline.stages import DirectIndexReport, documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.sparse import Bm25Encoder

VERSION_STEP = 1e-6


@dataclass
class ReconcilePlan:
    """What one container's reconciliation will change."""

    container: str
    remove: list[str] = field(default_factory=list)
    rewrite: list[Document] = field(default_factory=list)
    # Documents whose content is unchanged but whose readers changed: document id -> the ACL they need now.
    acl_updates: dict[str, Acl] = field(default_factory=dict)
    checked: int = 0


@dataclass
class ReconcileResult:
    """What a reconciliation changed in the index."""

    removed: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    acl_updated: list[str] = field(default_factory=list)
    checked: int = 0
    index: DirectIndexReport | None = None


def acl_differs(stored: IndexedDocument, acl: Acl) -> bool:
    """Whether the index holds other readers for the document than ``acl`` (member order does not count)."""
    return stored.acl != IndexedAcl(
        acl.public, frozenset(acl.users), frozenset(acl.groups), frozenset(acl.restricted_to)
    )


def acl_payload(acl: Acl) -> dict[str, object]:
    """The ``acl`` payload value exactly as a write of the document stores it (``stages.document_points``)."""
    return {"acl": json.loads(acl.model_dump_json())}


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


def apply_plans(
    store: VectorStore, plans: Sequence[ReconcilePlan], writers: IndexWriters | Callable[[], IndexWriters]
) -> ReconcileResult:
    """Rewrite changed documents (new points before old ones go), give documents whose readers changed
    their new ACL, then remove vanished ones. ``writers`` may be a loader: it is called only when a document
    has to be rewritten, so a run that changes ACLs or removes documents never loads the dense model."""
    result = ReconcileResult(checked=sum(p.checked for p in plans))
    rewrite = [d for p in plans for d in p.rewrite]
    if rewrite:
        w = writers if isinstance(writers, IndexWriters) else writers()
        result.index = index_documents_directly(store, documents_frame(rewrite), w.chunker, w.encoder, w.bm25, w.cache)
        result.rewritten = [d.id for d in rewrite]
    result.acl_updated = update_acls(store, {k: v for p in plans for k, v in p.acl_updates.items()})
    remove = [doc_id for p in plans for doc_id in p.remove]
    if remove:
        for collection in (store.names.children, store.names.parents):
            store.delete_documents(collection, remove)
        record_written(store)
        result.removed = remove
    return result


def update_acls(store: VectorStore, updates: dict[str, Acl]) -> list[str]:
    """Replace the ``acl`` payload of every point of each document, one filtered update per ACL and batch of
    documents. Children first: reconciliation reads a document's ACL from its parents, so a run stopped
    halfway is found again (and finished) by the next one."""
    by_acl: dict[Acl, list[str]] = defaultdict(list)
    for doc_id, acl in updates.items():
        by_acl[acl].append(doc_id)
    for acl, doc_ids in by_acl.items():
        for collection in (store.names.children, store.names.parents):
            store.set_document_payload(collection, sorted(doc_ids), acl_payload(acl))
    if updates:
        # A change of who may read is a write: readers' caches key on it (a Qdrant server is never reopened).
        record_written(store)
    return sorted(updates)
