"""Writes documents' points so that a document is never regressed and never missing mid-run.

For each document: if the index already holds a newer version, the write is skipped (an old
partition re-run after a newer one changes nothing). Otherwise the new points are upserted first
and only then are the document's stale points (ids it no longer produces) removed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rag_pipeline.index.store import StorePoint, VectorStore


@dataclass
class DocumentPoints:
    """Everything the index holds for one version of one document."""

    document_id: str
    version: float
    parents: list[StorePoint]
    children: list[StorePoint]


@dataclass
class WriteReport:
    """What a write changed."""

    documents_written: int = 0
    documents_skipped_older: int = 0
    points_upserted: int = 0
    points_removed: int = 0
    skipped_document_ids: list[str] = field(default_factory=list)

    def add(self, other: WriteReport) -> None:
        self.documents_written += other.documents_written
        self.documents_skipped_older += other.documents_skipped_older
        self.points_upserted += other.points_upserted
        self.points_removed += other.points_removed
        self.skipped_document_ids.extend(other.skipped_document_ids)


def write_documents(store: VectorStore, documents: Sequence[DocumentPoints], batch_size: int = 500) -> WriteReport:
    """Upsert documents' points in batches; see the module docstring for the guarantees."""
    report = WriteReport()
    # A document can appear twice (two partitions of one range); the newest version wins.
    newest: dict[str, DocumentPoints] = {}
    for doc in documents:
        if doc.document_id not in newest or doc.version >= newest[doc.document_id].version:
            newest[doc.document_id] = doc
    ordered = list(newest.values())
    for i in range(0, len(ordered), batch_size):
        report.add(_write_batch(store, ordered[i : i + batch_size]))
    return report


def _write_batch(store: VectorStore, docs: Sequence[DocumentPoints]) -> WriteReport:
    report = WriteReport()
    names = store.names
    ids = [d.document_id for d in docs]
    existing: dict[str, dict[str, list[str]]] = {names.children: defaultdict(list), names.parents: defaultdict(list)}
    stored_version: dict[str, float] = {}
    for collection in (names.children, names.parents):
        for ref in store.document_points(collection, ids):
            existing[collection][ref.document_id].append(ref.id)
            stored_version[ref.document_id] = max(stored_version.get(ref.document_id, ref.version), ref.version)

    to_write = []
    for doc in docs:
        if doc.document_id in stored_version and stored_version[doc.document_id] > doc.version:
            report.documents_skipped_older += 1
            report.skipped_document_ids.append(doc.document_id)
        else:
            to_write.append(doc)

    children = [p for d in to_write for p in d.children]
    parents = [p for d in to_write for p in d.parents]
    # Parents first: a child must never point at a parent that is not there yet.
    store.upsert(names.parents, parents)
    store.upsert(names.children, children)
    report.points_upserted = len(children) + len(parents)
    report.documents_written = len(to_write)

    points_by_collection: tuple[tuple[str, Callable[[DocumentPoints], list[StorePoint]]], ...] = (
        (names.children, lambda d: d.children),
        (names.parents, lambda d: d.parents),
    )
    for collection, points_of in points_by_collection:
        stale: list[str] = []
        for doc in to_write:
            fresh = {p.id for p in points_of(doc)}
            stale.extend(pid for pid in existing[collection].get(doc.document_id, []) if pid not in fresh)
        store.delete_ids(collection, stale)
        report.points_removed += len(stale)
    return report
