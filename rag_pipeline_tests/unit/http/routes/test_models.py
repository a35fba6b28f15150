"""``rag_pipeline.http.routes.models``: ``GET /v1/models`` lists the answer model the service serves, none when
answers are off."""

from __future__ import annotations

from pathlib import Path

from rag_pipeline.answers.generate import AnswerModel
from rag_pipeline.http.routes import models
from rag_pipeline_tests.unit.http.conftest import served


def test_the_route_is_get_v1_models() -> None:
    assert [(r.path, r.methods) for r in models.router.routes] == [("/v1/models", {"GET"})]  # type: ignore[attr-defined]


def test_no_answer_model_lists_none(index_folder: Path) -> None:
    with served(index_folder) as client:
        assert client.get("/v1/models").json() == {"object": "list", "data": []}


def test_the_answer_model_is_listed_by_its_name(index_folder: Path) -> None:
    with served(index_folder, answers=AnswerModel("model-under-test", client=object())) as client:
        body = client.get("/v1/models").json()
    assert [m["id"] for m in body["data"]] == ["model-under-test"]
    assert body["data"][0]["object"] == "model"
