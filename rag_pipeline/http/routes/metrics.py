"""``GET /metrics``: the Prometheus exposition of the service's counters and histograms."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from rag_pipeline.http.metrics import CONTENT_TYPE
from rag_pipeline.http.state import HttpState, http_state

router = APIRouter()


@router.get("/metrics")
def prometheus_metrics(state: HttpState = Depends(http_state)) -> Response:
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE)
