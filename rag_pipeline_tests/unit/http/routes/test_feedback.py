"""``rag_pipeline.http.routes.feedback``: ``POST /v1/feedback`` is 404 while readers' feedback is off; on, it keeps
a judgement of a document the reader may read, under the reader's ids, and answers any other document as missing,
keeping nothing."""

from __future__ import annotations

from pathlib import Path

from rag_pipeline.http.routes import feedback
from rag_pipeline.serving.feedback import FeedbackStore, read_feedback
from rag_pipeline_tests.unit.http.conftest import HR, HR_ONLY, PUBLIC, reader, served


def test_the_route_is_post_v1_feedback() -> None:
    assert [(r.path, r.methods) for r in feedback.router.routes] == [("/v1/feedback", {"POST"})]  # type: ignore[attr-defined]


def test_feedback_off_is_a_404_saying_how_to_turn_it_on(index_folder: Path) -> None:
    with served(index_folder) as client:
        response = client.post("/v1/feedback", json={"query": "postgres", "document_id": PUBLIC, "grade": 2},
                               headers=reader("U1"))  # fmt: skip
    assert response.status_code == 404 and "RAG_FEEDBACK_DAYS" in response.json()["error"]


def test_a_judgement_is_kept_only_for_a_document_the_reader_may_read(index_folder: Path, tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback", retention_days=7)
    with served(index_folder, service_options={"feedback": store}) as client:
        kept = client.post("/v1/feedback", json={"query": "salary budget", "document_id": HR_ONLY, "grade": 2},
                           headers=reader("U1", HR))  # fmt: skip
        hidden = client.post("/v1/feedback", json={"query": "salary budget", "document_id": HR_ONLY, "grade": 0},
                             headers=reader("U2"))  # fmt: skip
        invalid = client.post("/v1/feedback", json={"query": "x y", "document_id": PUBLIC, "grade": 3},
                              headers=reader("U1"))  # fmt: skip
    assert kept.status_code == 200 and kept.json()["recorded"] is True
    assert (kept.json()["document_id"], kept.json()["grade"]) == (HR_ONLY, 2)
    assert hidden.status_code == 404 and hidden.json()["field"] == "document_id"
    assert invalid.status_code == 422 and invalid.json()["field"] == "grade"
    stored = list(read_feedback(tmp_path / "feedback"))
    assert [(e["document"], e["grade"], e["query"]) for e in stored] == [(HR_ONLY, 2, "salary budget")]
    assert "U1" in stored[0]["reader"]
