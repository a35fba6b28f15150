"""``GET /v1/models`` (OpenAI-compatible): the answer model this service serves, if any."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from rag_pipeline.http.state import HttpState, http_state

router = APIRouter()


@router.get("/v1/models")
def models(state: HttpState = Depends(http_state)) -> dict[str, Any]:
    served = [state.answers.model] if state.answers is not None else []
    return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "rag-pipeline"}
                                       for m in served]}  # fmt: skip
