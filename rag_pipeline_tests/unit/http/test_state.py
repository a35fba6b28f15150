"""``rag_pipeline.http.state``: what every route shares. The service token compared as the client sent it, the
reader from the identity headers (groups only behind a trusted proxy), the answer model a request may name, and
the admin mark that only the service sets."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import Depends, FastAPI
from pydantic import SecretStr
from starlette.requests import Request

from rag_pipeline.answers.generate import AnswerModel
from rag_pipeline.http.app import create_app
from rag_pipeline.http.errors import RequestRefused
from rag_pipeline.http.state import ADMIN_HEADER, SERVICE_MODEL_NAME, HttpState, caller, http_state
from rag_pipeline.serving.identity import IdentityError, Reader
from rag_pipeline.settings import ServeSettings
from rag_pipeline_tests.unit.http.conftest import HR, in_process_service, reader, served


def _state(folder: Path, settings: ServeSettings, **app: object) -> HttpState:
    state = create_app(in_process_service(folder), settings, **app).state.rag  # type: ignore[arg-type]
    assert isinstance(state, HttpState)
    return state


def _request(**headers: str) -> Request:
    """A request whose header values are the UTF-8 bytes a client sends (the server reads them as Latin-1)."""
    raw = [(k.lower().encode("latin-1"), v.encode("utf-8")) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw})


def test_the_token_is_compared_as_sent_and_any_request_passes_without_one(tmp_path: Path) -> None:
    guarded = _state(tmp_path, ServeSettings(token=SecretStr("tökén-1")))
    assert guarded.has_token(_request(Authorization="Bearer tökén-1"))
    assert guarded.has_token(_request(Authorization="bearer  tökén-1 "))  # the scheme's case, blanks around
    assert not guarded.has_token(_request(Authorization="Bearer tökén-2"))
    assert not guarded.has_token(_request(Authorization="Basic tökén-1"))
    assert not guarded.has_token(_request())
    assert _state(tmp_path, ServeSettings()).has_token(_request())


def test_groups_are_believed_only_behind_a_trusted_proxy(tmp_path: Path) -> None:
    trusted = _state(tmp_path, ServeSettings(trusted_proxy=True)).reader_from("U1", None, f"{HR},ops")
    assert trusted.principal.user_id == "U1" and set(trusted.principal.groups) == {HR, "ops"}
    direct = _state(tmp_path, ServeSettings())
    with pytest.raises(IdentityError) as refused:
        direct.reader_from("U1", None, HR)
    assert refused.value.status == 400 and refused.value.field == "X-User-Groups"
    assert direct.reader_from("U1", None, None).principal.groups == ()


def test_a_request_may_name_the_served_model_or_none(tmp_path: Path) -> None:
    off = _state(tmp_path, ServeSettings())
    with pytest.raises(RequestRefused) as no_answers:
        off.answer_model(None)
    assert (no_answers.value.status, no_answers.value.field) == (503, "model")
    model = AnswerModel("served-model", client=object())
    on = _state(tmp_path, ServeSettings(), answers=model)
    assert all(on.answer_model(name) is model for name in (None, "", SERVICE_MODEL_NAME, "served-model"))
    with pytest.raises(RequestRefused) as other:
        on.answer_model("gpt-other")
    assert (other.value.status, other.value.field) == (400, "model") and "gpt-other" in str(other.value)
    with pytest.raises(RequestRefused) as no_rewriter:
        on.planned("a question")
    assert (no_rewriter.value.status, no_rewriter.value.field) == (503, "rewrite")


def test_the_admin_mark_is_the_services_not_the_callers(index_folder: Path) -> None:
    """A client's own ``X-Rag-Admin: 1`` is dropped; an identity in RAG_SERVE_ADMINS gets it (read by
    :func:`caller`)."""
    settings = ServeSettings(trusted_proxy=True, admins=("boss@example.com",))
    with served(index_folder, settings) as client:
        app: FastAPI = client.app  # type: ignore[assignment]

        @app.get("/v1/_who")
        def who(reader: Reader = Depends(caller), state: HttpState = Depends(http_state)) -> dict[str, object]:
            return {"admin": reader.admin, "user": reader.principal.user_id, "trusted": state.settings.trusted_proxy}

        forged = client.get("/v1/_who", headers={**reader("U1"), ADMIN_HEADER: "1"}).json()
        boss = client.get("/v1/_who", headers={"X-User-Email": "boss@example.com"}).json()
    assert forged == {"admin": False, "user": "U1", "trusted": True}
    assert boss["admin"] is True
