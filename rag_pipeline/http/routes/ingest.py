"""The design's ingestion API, as admin routes of the search service (its own token, ``RAG_INGEST_TOKEN``):

| design | here |
|---|---|
| ``GET /v1/scheduler/status`` | the scheduler's state per source (``rag-pipeline status --json``) and recent jobs |
| ``POST /v1/ingest`` ``{"source": "slack"}`` | 202: a job syncing that source, as the sync sensor would |
| ``POST /v1/ingest/all`` | 202: a job syncing every live source, one after the other |
| (added) ``GET /v1/ingest/{job_id}`` | the job's state and each sync's summary |
| (added) ``POST /v1/ingest/documents`` | 202: a job writing pushed documents of a registered pushed source |

Only a caller with the ingestion token gets past the door: the readers' token, personal tokens and OIDC identities
are never accepted here, and these routes never take a reader's identity. Without ``RAG_INGEST_TOKEN`` the routes
answer 404 saying how to turn them on. The work is :class:`~rag_pipeline.serving.ingest_runs.IngestLauncher`'s.
"""

from __future__ import annotations

import secrets
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from rag_pipeline.http.errors import RequestRefused
from rag_pipeline.http.state import HttpState, http_state
from rag_pipeline.serving.ingest_runs import IngestBusy, IngestLauncher
from rag_pipeline.serving.pushed_documents import DocumentPushes
from rag_pipeline.sources.pushed_documents import PUSH_PATH, FieldProblem, PushInvalid

# The routes' prefixes (a path like /v1/ingestion is not one of them).
PREFIXES = ("/v1/ingest/", "/v1/scheduler/")
router = APIRouter()


def is_ingest_path(path: str) -> bool:
    """Whether ``path`` is one of these routes (which the readers' authentication leaves to :func:`refusal`)."""
    return path == "/v1/ingest" or path.startswith(PREFIXES)


def refusal(path: str, authorization: str, token: bytes | None) -> tuple[int, str] | None:
    """(status, message) when the caller may not use the ingestion API, None when it may."""
    if token is None:
        return 404, "the ingestion API is off: set RAG_INGEST_TOKEN on the service"
    scheme, _, value = authorization.partition(" ")
    given = value.strip().encode() if scheme.lower() == "bearer" else b""
    if not given or not secrets.compare_digest(given, token):
        return 401, "the ingestion API needs Authorization: Bearer <RAG_INGEST_TOKEN>"
    return None


class IngestRequest(BaseModel):
    """``POST /v1/ingest``: the one source to sync."""

    model_config = ConfigDict(extra="forbid", strict=True)
    source: str = Field(min_length=1, max_length=64, description="a live source (slack, jira)")


def _error(status: int, message: str, field: str | None, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, "field": field, **extra}, status_code=status)


def _launcher(state: HttpState = Depends(http_state)) -> IngestLauncher:
    # The app includes this router only with a launcher and a token; the guard has checked the token.
    if state.ingest is None:
        raise RequestRefused(404, None, "the ingestion API is off: set RAG_INGEST_TOKEN on the service")
    return state.ingest


def _started(launcher: IngestLauncher, sources: list[str]) -> JSONResponse:
    try:
        job = launcher.start(sources)
    except IngestBusy as busy:
        return _error(409, str(busy), None, job=busy.job.as_dict())
    except ValueError as exc:
        return _error(422, str(exc), "source")
    return JSONResponse({"job": job.as_dict()}, status_code=202, headers={"Location": f"/v1/ingest/{job.id}"})


@router.post("/v1/ingest")
def ingest(request: IngestRequest, launcher: IngestLauncher = Depends(_launcher)) -> JSONResponse:
    return _started(launcher, [request.source])


@router.post("/v1/ingest/all")
def ingest_all(launcher: IngestLauncher = Depends(_launcher)) -> JSONResponse:
    if not launcher.live_sources:
        return _error(422, "no live source is configured (SLACK_BOT_TOKEN, JIRA_URL)", "source")
    return _started(launcher, list(launcher.live_sources))


async def _body(request: Request, pushes: DocumentPushes) -> bytes:
    """The body, refused past the push limit (declared, or counted as it arrives): this route has its own limit,
    larger than the other /v1 routes' (http/limits.py leaves it to this one)."""
    limit = pushes.limits.max_body_bytes
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise PushInvalid(413, [FieldProblem("body", pushes.too_large())])
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PushInvalid(413, [FieldProblem("body", pushes.too_large())])
        chunks.append(chunk)
    return b"".join(chunks)


@router.post(PUSH_PATH)
async def push_documents(request: Request, launcher: IngestLauncher = Depends(_launcher)) -> JSONResponse:
    """Documents of a registered pushed source, checked whole (every problem named), written by a job."""
    pushes = DocumentPushes(launcher)
    try:
        body = await _body(request, pushes)
        batch = await anyio.to_thread.run_sync(pushes.check, body)  # up to megabytes of checks: off the event loop
        job = await anyio.to_thread.run_sync(pushes.start, batch)
    except PushInvalid as refused:
        return _error(refused.status, str(refused), refused.field, errors=[p.as_dict() for p in refused.problems])
    except IngestBusy as busy:
        response = _error(409, f"{busy}; push again once it ends", None, job=busy.job.as_dict())
        response.headers["Retry-After"] = "5"
        return response
    counts = {"documents": len(batch.pushed), "deleted": len(batch.deleted_ids)}
    return JSONResponse({"job": job.as_dict(), **counts}, status_code=202, headers={"Location": f"/v1/ingest/{job.id}"})


@router.get("/v1/ingest/{job_id}")
def ingest_job(job_id: str, launcher: IngestLauncher = Depends(_launcher)) -> JSONResponse:
    job = launcher.job(job_id) if len(job_id) <= 64 else None
    if job is None:
        return _error(404, f"no ingestion job {job_id[:64]!r}", "job_id")
    return JSONResponse({"job": job.as_dict()})


@router.get("/v1/scheduler/status")
async def scheduler_status(launcher: IngestLauncher = Depends(_launcher)) -> JSONResponse:
    try:
        status = await anyio.to_thread.run_sync(launcher.scheduler_status)
    except RuntimeError as exc:
        return _error(503, f"the scheduler's state could not be read: {exc}", None)
    return JSONResponse({"scheduler": status, "jobs": [j.as_dict() for j in launcher.jobs()]})
