"""Writes documents' points so that a document is never regressed and never missing mid-run.

For each document: if the index already holds a newer version, the write is skipped (an old
partition re-run after a newer one changes nothing). Otherwise the new points are upserted first
and only then are the document's stale points (ids it no longer produces) removed.

A document may have a family: a Jira issue and its restricted comments, each its own document under its own
ACL. The head lists its members (payload ``family``) and each member names its head (``belongs_to``); both are
written with the head's version. Rewriting the head removes the members it no longer lists (a comment deleted,
or no longer restricted), and a member whose head the index holds in a newer version is skipped like an older
document, so an old partition re-run never brings back a comment a newer version dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rag_pipeline.index.store import StorePoint, VectorStore

# Payload fields of a family (see the module docstring); absent on documents without one.
BELONGS_TO = "belongs_to"
FAMILY = "family"


@dataclass
class DocumentPoints:
    """Everything the index holds for one version of one document."""

    document_id: str
    version: float
    parents: list[StorePoint]
    children: list[StorePoint]
    belongs_to: str | None = None  # the head of this document's family (a restricted comment's issue)
    family: tuple[str, ...] = ()  # a head's members, as of this version


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

    head_version = _stored_head_versions(store, docs, stored_version)
    to_write = []
    for doc in docs:
        newer = max(
            stored_version.get(doc.document_id, doc.version), head_version.get(doc.belongs_to or "", doc.version)
        )
        if newer > doc.version:
            report.documents_skipped_older += 1
            report.skipped_document_ids.append(doc.document_id)
        else:
            to_write.append(doc)
    dropped = _dropped_members(store, to_write, existing[names.parents])

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
    if dropped:
        for collection in (names.children, names.parents):
            refs = store.document_points(collection, dropped)
            store.delete_ids(collection, [r.id for r in refs])
            report.points_removed += len(refs)
    return report


def _stored_head_versions(
    store: VectorStore, docs: Sequence[DocumentPoints], stored_version: dict[str, float]
) -> dict[str, float]:
    """The index's version of each head a member of ``docs`` belongs to (those in this batch are known)."""
    heads = {d.belongs_to for d in docs if d.belongs_to} - set(stored_version)
    found = dict(stored_version)
    for ref in store.document_points(store.names.parents, sorted(heads)) if heads else []:
        found[ref.document_id] = max(found.get(ref.document_id, ref.version), ref.version)
    return found


def _dropped_members(
    store: VectorStore, written: Sequence[DocumentPoints], existing_parents: dict[str, list[str]]
) -> list[str]:
    """Members the stored versions of the written heads listed and the new versions do not."""
    heads = [d for d in written if d.belongs_to is None and existing_parents.get(d.document_id)]
    if not heads:
        return []
    # One stored parent per head is enough: every point of a document carries the same family.
    stored = store.retrieve(store.names.parents, [existing_parents[d.document_id][0] for d in heads])
    listed = {str(h.payload.get("document_id")): set(h.payload.get(FAMILY) or ()) for h in stored}
    return sorted(m for d in heads for m in listed.get(d.document_id, set()) - set(d.family))
