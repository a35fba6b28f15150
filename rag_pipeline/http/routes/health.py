"""``GET /health``: ready or not (503), with the index's details for an authenticated caller."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from rag_pipeline.http.state import HttpState, http_state

router = APIRouter()


@router.api_route("/health", methods=["GET", "HEAD"])
def health(request: Request, state: HttpState = Depends(http_state)) -> JSONResponse:
    ready, body = state.service.health()
    if state.verifier is not None or (state.token is not None and not state.has_token(request)):
        # Unauthenticated load balancers get the verdict only: no paths, counts or model names.
        body = {"status": body["status"]}
    return JSONResponse(body, status_code=200 if ready else 503)
