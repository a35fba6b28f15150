"""``rag_pipeline.serving.refusal``: every use case's refusal carries a status, the field at fault and a message, and
the HTTP service answers any of them alike (one handler) with that status and ``{"error", "field"}``; a request
model's refusal names its first field, dotted (what the CLI and MCP faces print)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field, ValidationError, model_validator

from rag_pipeline.http.errors import RequestRefused, install_error_handlers
from rag_pipeline.serving.access import AccessRefused
from rag_pipeline.serving.active_tools import ActiveSetRefused
from rag_pipeline.serving.identity import IdentityError
from rag_pipeline.serving.refusal import Refusal, first_invalid

REFUSALS: dict[str, Refusal] = {
    "identity": IdentityError(401, "X-User-Id", "an identity is required"),
    "access": AccessRefused(403, "person", "only an admin may ask about another person"),
    "active": ActiveSetRefused("no indexed tool is named 'x'", 404),
    "request": RequestRefused(404, None, "the ingestion API is off"),
}


def test_each_refusal_keeps_its_status_field_and_message() -> None:
    found = {name: (r.status, r.field, str(r)) for name, r in REFUSALS.items()}
    assert found == {
        "identity": (401, "X-User-Id", "an identity is required"),
        "access": (403, "person", "only an admin may ask about another person"),
        "active": (404, "names", "no indexed tool is named 'x'"),  # its field defaults to the argument "names"
        "request": (404, None, "the ingestion API is off"),
    }
    assert (ActiveSetRefused("too many").status, ActiveSetRefused("x", field="session").field) == (400, "session")
    # Callers that catch ValueError still catch the two that were ValueErrors.
    assert isinstance(REFUSALS["identity"], ValueError) and isinstance(REFUSALS["active"], ValueError)


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_the_http_service_answers_each_refusal_with_its_status_and_field(name: str) -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/refuse")
    def refuse() -> None:
        raise REFUSALS[name]

    refusal = REFUSALS[name]
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/refuse")
    assert answer.status_code == refusal.status
    assert answer.json() == {"error": str(refusal), "field": refusal.field}


class _Window(BaseModel):
    since: str
    until: str

    @model_validator(mode="after")
    def _ordered(self) -> _Window:
        if self.until < self.since:
            raise ValueError("until is before since")
        return self


class _Request(BaseModel):
    query: str = Field(min_length=1)
    window: _Window | None = None


def _refused(arguments: object) -> ValidationError:
    with pytest.raises(ValidationError) as refused:
        _Request.model_validate(arguments)
    return refused.value


def test_first_invalid_names_the_first_refused_field_dotted_or_where_it_names_none() -> None:
    assert first_invalid(_refused({"query": ""})) == ("query", "String should have at least 1 character")
    assert first_invalid(_refused({"query": "q", "window": {"since": "b"}})) == ("window.until", "Field required")
    # A check of a whole nested model names that model.
    whole = _refused({"query": "q", "window": {"since": "b", "until": "a"}})
    assert first_invalid(whole) == ("window", "Value error, until is before since")
    # Arguments that are no object at all name no field: the face's word for them stands in.
    not_an_object = "Input should be a valid dictionary or instance of _Request"
    assert first_invalid(_refused([])) == ("arguments", not_an_object)
    assert first_invalid(_refused([]), nowhere="") == ("", not_an_object)
