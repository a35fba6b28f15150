"""The reranked arm trained on earlier weeks: blocks of whole weeks in order, and no model ever trained on a query
of the week it scores or a later one."""

from __future__ import annotations

import itertools

import pytest

from rag_pipeline.evaluation import runner
from rag_pipeline.evaluation.eval_set import EvalQuery
from rag_pipeline.evaluation.runner import dated, query_week, temporal_rerankers, week_blocks
from rag_pipeline.retrieval.rerank.learned import RerankExample


def _queries() -> list[EvalQuery]:
    weeks = ["2024-01-01", "2024-01-08", "2024-01-15", "2024-01-22", "2024-01-29", "2024-02-05"]
    return [
        EvalQuery(id=f"q{w}-{i}", query=f"question {w} {i}", relevant={f"d{w}{i}": 1}, tags=["mined", f"week:{w}"])
        for w in weeks
        for i in range(3 if w != "2024-01-15" else 7)
    ]


def test_blocks_are_whole_weeks_in_order() -> None:
    queries = _queries()
    blocks = week_blocks(queries, blocks=3)
    assert len(blocks) == 3 and sum(len(b) for b in blocks) == len(queries)
    ordered = [query_week(q) for b in blocks for q in b]
    assert ordered == sorted(ordered)
    for earlier, later in itertools.pairwise(blocks):
        assert max(map(query_week, earlier)) < min(map(query_week, later))  # a week is never split
    assert dated(queries) and not dated([EvalQuery(id="x", query="q", relevant={"d": 1})])


def test_no_model_trains_on_its_own_week_or_a_later_one(monkeypatch: pytest.MonkeyPatch) -> None:
    queries = _queries()
    by_id = {q.id: q for q in queries}
    monkeypatch.setattr(
        runner,
        "rerank_examples",
        lambda _retriever, qs, **_kw: [RerankExample(q.id, q.query, [], []) for q in qs],
    )
    trained: list[list[str]] = []

    def fake_train(examples, **_kw):
        trained.append([e.query_id for e in examples])
        return f"model{len(trained)}"

    monkeypatch.setattr(runner, "train_reranker", fake_train)

    class Retriever:
        bm25 = None

    chosen = temporal_rerankers(Retriever(), queries, blocks=4)  # type: ignore[arg-type]
    first_block = week_blocks(queries, 4)[0]
    assert not set(chosen) & {q.id for q in first_block}  # no past: the hybrid order
    assert len(trained) == 3
    models = {name: i for i, name in enumerate(sorted(set(chosen.values())), start=0)}
    for qid, model in chosen.items():
        training = trained[models[model]]
        assert training and max(query_week(by_id[t]) for t in training) < query_week(by_id[qid])
