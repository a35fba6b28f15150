"""Writing a checked batch of pushed documents (``rag-pipeline push``, the job ``POST /v1/ingest/documents``
starts): the index opened as the pipeline's steps open it (handed over by a running service like any writer's),
and the documents chunked, embedded and written by the chain's own stages
(:func:`rag_pipeline.stages.index_documents_directly`), with the same embedding cache and document-size cut. The
writer never regresses a document (an older version than the stored one is skipped) and replaces a re-pushed id's
points, new ones before stale ones go, so a re-push updates and never duplicates. Deletions remove every point of
the ids named.

Once written, the batch is appended to the source's raw record (:mod:`rag_pipeline.sources.pushed_store`), and
:func:`replay_pushed` writes that record back into an index rebuilt from raw data (``rag-pipeline index`` and
``demo`` call it after their runs; ``rag-pipeline push --replay`` for any other rebuild)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag_pipeline.composition import bm25_encoder, dense_encoder_of, open_index
from rag_pipeline.index.index_info import record_written
from rag_pipeline.settings import Settings
from rag_pipeline.sources.document import truncated
from rag_pipeline.sources.pushed_documents import PushBatch, PushedDocument
from rag_pipeline.sources.pushed_store import PushedStore
from rag_pipeline.stages import documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.cache import EmbeddingCache


@dataclass
class PushReport:
    """What a push wrote (the launcher's job shows it as the summary)."""

    source: str
    documents: int = 0
    documents_written: int = 0
    documents_skipped_older: int = 0
    skipped_document_ids: list[str] = field(default_factory=list)
    deleted: int = 0
    already_indexed: int = 0
    unreadable_records: int = 0
    truncated: int = 0
    parent_chunks: int = 0
    child_chunks: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def write_pushed(settings: Settings, batch: PushBatch, record: bool = True) -> PushReport:
    """Write ``batch`` to the configured index (which must exist: the first index is built by ``index`` or a sync,
    which also chooses its language and models), then (``record``) append it to the source's raw record: only a
    batch the index took is recorded, and a failed job's batch is recorded by the write that retries it."""
    report = _write(settings, batch)
    if record:
        PushedStore(settings.paths.root).record(batch)
    return report


def replay_pushed(settings: Settings, batch_size: int = 200) -> list[PushReport]:
    """Every recorded pushed source written into the index as its record says it is now: each live document whose
    version the index does not hold yet (an index rebuilt from raw data holds none), and each tombstone deleted
    (already gone from a rebuilt index). In batches of ``batch_size`` documents; nothing is recorded again."""
    store = PushedStore(settings.paths.root)
    reports = []
    for source in store.sources():
        state = store.state(source)
        whole = state.batch()
        report = PushReport(source)
        report.unreadable_records = state.unreadable
        missing = _not_indexed(settings, whole)
        report.already_indexed = len(whole.pushed) - len(missing)
        parts = [PushBatch(source, missing[i : i + batch_size], []) for i in range(0, len(missing), batch_size)]
        parts.append(PushBatch(source, [], whole.deleted_ids))
        for part in parts:
            if part.pushed or part.deleted_ids:
                _add(report, _write(settings, part))
        reports.append(report)
    return reports


def _not_indexed(settings: Settings, batch: PushBatch) -> list[PushedDocument]:
    """The batch's documents the index lacks at their recorded version."""
    if not batch.pushed:
        return []
    documents = batch.documents()
    with open_index(settings) as store:
        points = store.document_points(store.names.parents, [d.id for d in documents])
        stored = {r.document_id: r.version for r in points}
    return [p for p, d in zip(batch.pushed, documents, strict=True) if stored.get(d.id) != d.version]


def _add(total: PushReport, part: PushReport) -> None:
    for name in ("documents", "documents_written", "documents_skipped_older", "deleted", "truncated",
                 "parent_chunks", "child_chunks"):  # fmt: skip
        setattr(total, name, getattr(total, name) + getattr(part, name))
    total.skipped_document_ids += part.skipped_document_ids


def _write(settings: Settings, batch: PushBatch) -> PushReport:
    report = PushReport(batch.source, documents=len(batch.pushed))
    documents = batch.documents()
    cut = [(d, truncated(d, settings.max_document_chars)) for d in documents]
    documents = [short or d for d, short in cut]
    report.truncated = sum(short is not None for _, short in cut)
    encoder = dense_encoder_of(settings) if documents else None
    with open_index(settings) as store:
        if encoder is not None:
            chunker = Chunker(settings.chunking, encoder.count_tokens, encoder.max_tokens)
            cache = EmbeddingCache(settings.paths.embedding_cache)
            frame = documents_frame(documents)
            written = index_documents_directly(store, frame, chunker, encoder, bm25_encoder(settings), cache)
            report.documents_written = written.write.documents_written
            report.documents_skipped_older = written.write.documents_skipped_older
            report.skipped_document_ids = list(written.write.skipped_document_ids)
            report.parent_chunks, report.child_chunks = written.parents, written.children
        deleted = batch.deleted()
        if deleted:
            present = {r.document_id for r in store.document_points(store.names.parents, deleted)}
            for collection in (store.names.children, store.names.parents):
                store.delete_documents(collection, deleted)
            record_written(store)
            report.deleted = len(present)
    return report
