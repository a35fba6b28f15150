"""``POST /v1/ingest/documents``: documents pushed by a system without a connector, checked whole, then written by
the ingestion API's launcher as one job (``rag-pipeline push``), like every sync.

The request is checked in the service (shape, registered source, ACLs, limits; one bad document refuses the whole
batch, naming each problem). The checked batch is written as a JSON-lines file under
``<data dir>/ingest_api/pushed/`` and a launcher job runs ``rag-pipeline push FILE --source NAME``: the same child
process, job record, log and ``GET /v1/ingest/{job_id}`` as a sync, the index handed over by the service like any
writer's, and the same chunking, embedding and index writer (:func:`rag_pipeline.stages.index_documents_directly`:
never regress a document, new points before stale ones go) as the chain. Once the index took the batch, it is
appended to the source's raw record (:mod:`rag_pipeline.sources.pushed_store`), which a rebuilt index is replayed
from. The job file is removed once written; a failed job keeps it, and ``rag-pipeline push FILE`` writes it again.
The answer is 202 with the job; one job runs at a time, so a push while a sync runs is a 409 naming the running
job (retry after it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rag_pipeline.serving.ingest_runs import IngestJob, IngestLauncher
from rag_pipeline.settings import Settings
from rag_pipeline.sources.pushed_documents import (
    FieldProblem,
    PushBatch,
    PushInvalid,
    PushLimits,
    checked_batch,
    pushed_source_names,
)
from rag_pipeline.sources.registry import source_names


class DocumentPushes:
    """Checks pushed batches and hands them to ``launcher`` as push jobs."""

    def __init__(self, launcher: IngestLauncher, limits: PushLimits | None = None) -> None:
        self.launcher = launcher
        self.limits = limits or launcher.push_limits
        self.folder = launcher.logs / "pushed"

    def check(self, body: bytes) -> PushBatch:
        """The checked batch, or :class:`PushInvalid` naming every problem (nothing is written then)."""
        if len(body) > self.limits.max_body_bytes:
            raise PushInvalid(413, [FieldProblem("body", self.too_large())])
        return checked_batch(body, self.limits.sources, connectors(), self.limits.max_documents)

    def too_large(self) -> str:
        return f"the request body is over {self.limits.max_body_bytes} bytes (RAG_PUSH_MAX_BODY_BYTES)"

    def start(self, batch: PushBatch) -> IngestJob:
        """A push job for ``batch`` (:class:`~rag_pipeline.serving.ingest_runs.IngestBusy` while a job runs)."""

        def write(job_id: str) -> Path:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{batch.source}-{job_id}.jsonl"
            path.write_text(batch.lines(), encoding="utf-8")
            return path

        return self.launcher.start_push(batch.source, write)


def connectors() -> Sequence[str]:
    """The registered connectors' sources: never a pushed source's name."""
    return source_names()


def push_limits(settings: Settings) -> PushLimits:
    """The pushed sources and limits the settings name; a ValueError for a name that cannot be a pushed source."""
    serve = settings.serve
    sources = pushed_source_names(serve.push_sources, connectors())
    return PushLimits(sources, serve.push_max_body_bytes, serve.push_max_documents)
