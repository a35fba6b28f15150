"""Readers' judgements as an eval set (grouped per reader and question, the latest grade, only what the reader may
still read) and the gate: feedback trains the reranker only when it helps on later weeks, never trained on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipeline.evaluation import feedback_set
from rag_pipeline.evaluation.eval_set import EvalQuery
from rag_pipeline.evaluation.feedback_set import FEEDBACK_SET, MIN_GATE_QUERIES, add_feedback, feedback_gate
from rag_pipeline.evaluation.mining.corpus import Corpus
from rag_pipeline.evaluation.mining.mine import MiningReport
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.rerank.learned import RerankExample
from rag_pipeline.serving.feedback import FeedbackStore, read_feedback
from rag_pipeline_tests.kit.mining import SECRET, SITE, jira_doc, write_workspace

RITA = Principal(user_id="rita", groups=(f"jira:{SITE}:project:OPS",))


def test_judgements_become_questions_run_as_their_reader(tmp_path: Path) -> None:
    raw, children = write_workspace(tmp_path / "ws", [
        jira_doc("1", "OPS-1", "Worker stalls", "The worker stops.", "2024-03-04"),
        jira_doc("2", "OPS-2", "Queue grows", "The queue grows.", "2024-03-04"),
        jira_doc("9", "OPS-9", "Findings", "Private.", "2024-03-04", SECRET),
    ])  # fmt: skip
    corpus = Corpus(raw, children)
    clock = iter([1710000000.0 + i * 60 for i in range(10)])
    store = FeedbackStore(tmp_path / "feedback", retention_days=30, clock=lambda: next(clock))
    store.record(["rita"], "Why does the worker stall?", f"jira:{SITE}:1", 1)
    store.record(["rita"], "why does the  worker stall?", f"jira:{SITE}:1", 2)  # the same question, graded again
    store.record(["rita"], "why does the worker stall?", f"jira:{SITE}:2", 0)
    store.record(["rita"], "why does the worker stall?", f"jira:{SITE}:9", 2)  # rita may not read it (any more)
    store.record(["rita"], "where are the findings", f"jira:{SITE}:9", 2)  # nothing readable left
    store.record(["ghost"], "who am I", f"jira:{SITE}:1", 1)
    report = MiningReport()
    add_feedback(report, corpus, read_feedback(tmp_path / "feedback"), {"rita": RITA}.get)
    _meta, (query,) = report.eval_sets[FEEDBACK_SET]
    assert query.query == "Why does the worker stall?" and query.person == "rita"
    assert query.relevant == {f"jira:{SITE}:1": 2, f"jira:{SITE}:2": 0}
    assert "week:2024-03-04" in query.tags and "feedback" in query.tags
    assert report.skipped[("feedback", "no relevant document the reader may still read")] == 1
    assert report.skipped[("feedback", "reader not in the principal directory")] == 1


def test_feedback_older_than_the_retention_is_deleted(tmp_path: Path) -> None:
    now = [1710000000.0]
    store = FeedbackStore(tmp_path, retention_days=2, clock=lambda: now[0])
    store.record(["rita"], "old question", "d1", 1)
    now[0] += 3 * 86400
    store.record(["rita"], "new question", "d2", 1)
    assert [e["query"] for e in read_feedback(tmp_path)] == ["new question"]
    with pytest.raises(ValueError, match="RAG_FEEDBACK_DAYS"):
        FeedbackStore(tmp_path, retention_days=0)


def _feedback(weeks: int, per_week: int) -> list[EvalQuery]:
    return [
        EvalQuery(id=f"f{w}-{i}", query=f"q {w} {i}", relevant={"d": 1}, tags=["mined", "feedback", "readers",
                  "lang:latin", f"week:2024-{w + 1:02d}-01"])
        for w in range(weeks) for i in range(per_week)
    ]  # fmt: skip


@pytest.mark.parametrize("helps", [True, False])
def test_the_gate_uses_feedback_only_when_it_helps_later_weeks(monkeypatch: pytest.MonkeyPatch, helps: bool) -> None:
    queries = _feedback(weeks=4, per_week=MIN_GATE_QUERIES)
    trained: list[list[str]] = []
    monkeypatch.setattr(feedback_set, "rerank_examples",
                        lambda _r, qs, **_kw: [RerankExample(q.id, q.query, [], []) for q in qs])  # fmt: skip

    def train(examples, **_kw):
        trained.append([e.query_id for e in examples])
        return "with" if len(trained) == 2 else "without"

    monkeypatch.setattr(feedback_set, "train_reranker", train)
    better = 0.8 if helps else 0.5
    monkeypatch.setattr(feedback_set, "_ndcg", lambda _r, qs, model, _s: [
        (better if model == "with" else 0.5) + 0.01 * (i % 3) for i, _q in enumerate(qs)])  # fmt: skip

    class Retriever:
        bm25 = None

    base = [RerankExample("b1", "base", [], [])]
    gate = feedback_gate(Retriever(), base, queries)  # type: ignore[arg-type]
    assert gate.used is helps and gate.test_queries == 2 * MIN_GATE_QUERIES
    without, with_feedback = trained
    assert without == ["b1"]
    # Trained on the base and the earlier weeks only: never a question of a week it is tested on.
    assert set(with_feedback) - {"b1"} == {q.id for q in queries if q.tags[-1] < "week:2024-03-01"}


def test_the_gate_needs_enough_later_questions() -> None:
    gate = feedback_gate(None, [], _feedback(weeks=2, per_week=3))  # type: ignore[arg-type]
    assert not gate.used and "the gate needs" in gate.reason
