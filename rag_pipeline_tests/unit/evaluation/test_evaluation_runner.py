"""The evaluation runner: principals, exclusions, leak counting, chunk-level scores, persisted runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta
from rag_pipeline.evaluation.evaluate import chunk_level_means, evaluate_queries
from rag_pipeline.evaluation.run_files import load_arm_outcome, save_arm_outcome
from rag_pipeline.evaluation.runner import ArmOutcome, run_arm
from rag_pipeline.evaluation.summary import ArmRun
from rag_pipeline.index.writer import write_documents
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline_tests.unit.retrieval.test_retrieval import BM25, TopicEncoder, document

ACLS = {
    "k1": {"public": False, "users": [], "groups": ["team"]},
    "k2": {"public": False, "users": ["U1"], "groups": []},
    "w1": {"public": True, "users": [], "groups": []},
}
TEXTS = {"k1": "kernel panic at boot", "k2": "kernel oops after upgrade", "w1": "wifi drops"}
META = EvalSetMeta(name="t", description="", source="test", license="-", attribution="-", queries=3)


class AclBlindStore:
    """A broken engine that ignores the ACL condition: the evaluator must notice the leaks."""

    def __init__(self, store) -> None:
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def _strip(self, flt):
        return dataclasses.replace(flt, acl=None) if flt is not None else None

    def search_sparse(self, vector, limit, flt=None, fields=None):
        return self._store.search_sparse(vector, limit, self._strip(flt), fields=fields)


@pytest.fixture
def indexed(store):
    write_documents(store, [document(d, [[TEXTS[d]]], ACLS[d]) for d in TEXTS])
    return store


QUERIES = [
    EvalQuery(id="team", query="kernel", relevant={"k1": 1}, principal=Principal(user_id="U9", groups=("team",))),
    EvalQuery(id="u1", query="kernel", relevant={"k2": 1}, principal=Principal(user_id="U1")),
    EvalQuery(id="all", query="kernel", relevant={"k2": 1}, exclude=["k1"]),
]


def test_principals_exclusions_and_no_leaks(indexed) -> None:
    outcome = run_arm(Retriever(indexed, BM25, dense=TopicEncoder()), "bm25", QUERIES)
    docs = {q: [d for d, _ in r] for q, r in outcome.run.rankings.items()}
    assert docs == {"team": ["k1"], "u1": ["k2"], "all": ["k2"]}
    assert sum(outcome.run.leaks.values()) == 0 and set(outcome.run.latency_ms) == {"team", "u1", "all"}


def test_leaks_are_counted_when_the_engine_ignores_acls(indexed) -> None:
    outcome = run_arm(Retriever(AclBlindStore(indexed), BM25), "bm25", QUERIES)
    # "team" sees k2 (only U1 may), "u1" sees k1 (only the team may); the all-documents query cannot leak.
    assert outcome.run.leaks == {"team": 1, "u1": 1, "all": 0}
    result = evaluate_queries(Retriever(AclBlindStore(indexed), BM25), QUERIES, META, arms=["bm25"])
    assert result.leaks == 2 and result.summary.arms["bm25"].queries_with_leaks == 2


def test_chunk_level_scores_rank_each_documents_best_chunk() -> None:
    queries = [EvalQuery(id="q", query="x", relevant={"d1": 1}, relevant_chunks={"c2": 1})]
    outcome = ArmOutcome(
        ArmRun("a", {"q": [("d1", 2.0), ("d2", 1.0)]}, {}), chunk_rankings={"q": [("c1", 2.0), ("c2", 1.0)]}
    )
    means = chunk_level_means(queries, {"a": outcome})["a"]
    assert means["chunk_ndcg@10"] == pytest.approx(1 / 1.5849625, rel=1e-6)  # relevant chunk at rank 2
    assert means["chunk_mrr@10"] == 0.5 and means["chunk_recall@10"] == 1.0
    assert chunk_level_means([EvalQuery(id="q", query="x", relevant={"d1": 1})], {"a": outcome}) == {}


def test_runs_round_trip_through_parquet(indexed, tmp_path: Path) -> None:
    outcome = run_arm(Retriever(indexed, BM25, dense=TopicEncoder()), "hybrid", QUERIES)
    save_arm_outcome(tmp_path, "t", outcome)
    loaded = load_arm_outcome(tmp_path, "hybrid", "t")
    assert loaded.run.rankings == outcome.run.rankings and loaded.run.leaks == outcome.run.leaks
    assert loaded.chunk_rankings == outcome.chunk_rankings
    with pytest.raises(FileNotFoundError, match=r"retrieval_eval\[vector\]"):
        load_arm_outcome(tmp_path, "vector", "t")


def test_each_phase_reports_done_total_and_rate_from_its_start(indexed) -> None:
    from rag_pipeline.evaluation.progress import eval_set_progress

    updates = []
    run_arm(Retriever(indexed, BM25), "bm25", QUERIES, progress=eval_set_progress("t", updates.append))
    # Each query is a tenth or more of three: each is reported, under the eval set's name and the arm's; the arm
    # announced its start (0 of 3, not an update), so the rate counts from there.
    assert [(u.what, u.done, u.total) for u in updates] == [("t bm25", 1, 3), ("t bm25", 2, 3), ("t bm25", 3, 3)]
    assert updates[-1].per_second > 0 and updates[-1].line().startswith("t bm25: 3/3 (100%), ")
