"""Evaluation metrics, statistics, summary and report: hand-computed values and behaviour that could break."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_pipeline.evaluation.metrics import DEFAULT_METRICS, per_query_metrics, ragas_id_metrics, split_unjudged
from rag_pipeline.evaluation.report import markdown_table, plot_recall_curves, write_report
from rag_pipeline.evaluation.statistics import (
    bootstrap_ci,
    holm,
    paired_permutation_p,
    paired_permutation_pvalues,
    percentile_ms,
)
from rag_pipeline.evaluation.summary import ArmRun, EvalSummary, per_query_frame, summarize

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

QRELS = {
    # three relevant, one judged non-relevant
    "q1": {"d1": 1, "d2": 1, "d5": 1, "d3": 0},
    # graded
    "q2": {"a": 2, "b": 1},
    "q_empty": {"e": 1},
    "q_missing": {"m": 1},
    # no positive grade: dropped
    "q_unjudged": {"z": 0},
    # the only relevant document sits at rank 11
    "q_deep": {"deep": 1},
}
RUN = {
    # inserted in another order than QRELS: ranx aligns plain dicts by position, so this catches misalignment
    "q_deep": {f"n{i}": 1.0 - i / 100 for i in range(10)} | {"deep": 0.5},
    "q2": {"c": 0.9, "b": 0.8, "a": 0.7},
    "q1": {"d1": 9.0, "x": 8.0, "d2": 7.0, "y": 6.0, "z": 5.0, "w": 4.0, "d5": 3.0, "d3": 2.0},
    "q_empty": {},
    "q_unjudged": {"z": 1.0},
}


def ilog(rank: int) -> float:
    """The DCG discount of a 1-based rank."""
    return 1 / math.log2(rank + 1)


@pytest.fixture(scope="module")
def scores() -> pd.DataFrame:
    return per_query_metrics(QRELS, RUN)


def test_binary_query_matches_hand_computation(scores: pd.DataFrame) -> None:
    row = scores.loc["q1"]
    # relevant at ranks 1, 3, 7; three relevant in total
    assert row["ndcg@10"] == pytest.approx((ilog(1) + ilog(3) + ilog(7)) / (ilog(1) + ilog(2) + ilog(3)))
    assert row["recall@5"] == pytest.approx(2 / 3)
    assert row["recall@10"] == pytest.approx(1.0)
    assert row["mrr@10"] == pytest.approx(1.0)
    assert row["map@100"] == pytest.approx((1 / 1 + 2 / 3 + 3 / 7) / 3)
    assert row["hit_rate@10"] == 1.0


def test_graded_query_uses_linear_gains(scores: pd.DataFrame) -> None:
    row = scores.loc["q2"]
    # ranking c, b(1), a(2); ideal a(2), b(1)
    assert row["ndcg@10"] == pytest.approx((1 * ilog(2) + 2 * ilog(3)) / (2 * ilog(1) + 1 * ilog(2)))
    assert row["mrr@10"] == pytest.approx(1 / 2)
    assert row["map@100"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert row["recall@5"] == 1.0


def test_cutoffs_apply(scores: pd.DataFrame) -> None:
    row = scores.loc["q_deep"]
    assert row["hit_rate@10"] == 0.0
    assert row["mrr@10"] == 0.0
    assert row["recall@10"] == 0.0
    assert row["recall@50"] == 1.0
    assert row["map@100"] == pytest.approx(1 / 11)
    assert row["ndcg@10"] == 0.0


def test_empty_and_missing_rankings_score_zero(scores: pd.DataFrame) -> None:
    assert (scores.loc[["q_empty", "q_missing"]] == 0.0).all().all()


def test_frame_shape_and_unjudged_queries_dropped(scores: pd.DataFrame) -> None:
    assert list(scores.columns) == list(DEFAULT_METRICS)
    assert list(scores.index) == ["q1", "q2", "q_empty", "q_missing", "q_deep"]
    assert scores.attrs["unjudged"] == ["q_unjudged"]
    judged, unjudged = split_unjudged(QRELS)
    assert judged["q1"] == {"d1": 1, "d2": 1, "d5": 1}
    assert unjudged == ["q_unjudged"]


def test_single_metric_and_all_empty_run() -> None:
    one = per_query_metrics(QRELS, RUN, ["mrr@10"])
    assert list(one.columns) == ["mrr@10"]
    assert one.loc["q2", "mrr@10"] == pytest.approx(0.5)
    nothing = per_query_metrics(QRELS, {})
    assert (nothing == 0.0).all().all()
    assert len(nothing) == 5


def test_ties_keep_insertion_order() -> None:
    qrels = {"q": {"rel": 1}}
    assert per_query_metrics(qrels, {"q": {"other": 1.0, "rel": 1.0}}).loc["q", "mrr@10"] == 0.5
    assert per_query_metrics(qrels, {"q": {"rel": 1.0, "other": 1.0}}).loc["q", "mrr@10"] == 1.0


def test_ranx_agrees_with_trec_eval() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(7)
    qrels, run = {}, {}
    for q in range(40):
        docs = [f"d{i}" for i in range(150)]
        qrels[f"q{q}"] = {doc: int(rng.integers(1, 4)) for doc in rng.choice(docs, size=5, replace=False)}
        # distinct scores: trec_eval breaks ties by doc id, ranx by our insertion order
        retrieved = rng.choice(docs, size=120, replace=False)
        run[f"q{q}"] = {doc: float(120 - rank) for rank, doc in enumerate(retrieved)}
    ours = per_query_metrics(qrels, run, ["ndcg@10", "recall@10", "recall@100", "map@100"])
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10", "recall.100", "map_cut.100"})
    theirs = trec.evaluate(run)
    for q in qrels:
        assert ours.loc[q, "ndcg@10"] == pytest.approx(theirs[q]["ndcg_cut_10"])
        assert ours.loc[q, "recall@10"] == pytest.approx(theirs[q]["recall_10"])
        assert ours.loc[q, "recall@100"] == pytest.approx(theirs[q]["recall_100"])
        assert ours.loc[q, "map@100"] == pytest.approx(theirs[q]["map_cut_100"])


def test_ragas_id_metrics() -> None:
    qrels = {"q1": {"d1": 1, "d2": 1, "d3": 0}, "q_empty": {"e": 1}, "q_unjudged": {"z": 0}}
    run = {"q1": {"d1": 4.0, "x": 3.0, "d2": 2.0, "y": 1.0}, "q_empty": {}}
    top3 = ragas_id_metrics(qrels, run, k=3)
    assert list(top3.columns) == ["context_precision@3", "context_recall@3"]
    assert list(top3.index) == ["q1", "q_empty"]
    # top 3 = d1, x, d2: two of three retrieved are relevant, both relevant retrieved
    assert top3.loc["q1", "context_precision@3"] == pytest.approx(2 / 3)
    assert top3.loc["q1", "context_recall@3"] == pytest.approx(1.0)
    # empty retrieval: precision 0 (not ragas's NaN), recall 0
    assert top3.loc["q_empty"].tolist() == [0.0, 0.0]
    top1 = ragas_id_metrics(qrels, run, k=1)
    assert top1.loc["q1"].tolist() == pytest.approx([1.0, 0.5])
    # ragas divides by what came back (4 ids), not by k
    assert ragas_id_metrics(qrels, run, k=10).loc["q1", "context_precision@10"] == pytest.approx(2 / 4)


def test_bootstrap_ci_contains_mean_and_narrows() -> None:
    rng = np.random.default_rng(1)
    small = rng.normal(0.5, 0.2, 40)
    large = rng.normal(0.5, 0.2, 1000)
    lo_s, hi_s = bootstrap_ci(small)
    lo_l, hi_l = bootstrap_ci(large)
    assert lo_s < small.mean() < hi_s
    assert lo_l < large.mean() < hi_l
    assert hi_l - lo_l < (hi_s - lo_s) / 2
    assert bootstrap_ci(small) == (lo_s, hi_s)  # seeded


def test_bootstrap_ci_degenerate_inputs() -> None:
    assert bootstrap_ci([0.3] * 20) == (0.3, 0.3)
    assert bootstrap_ci([0.7]) == (0.7, 0.7)
    assert all(math.isnan(v) for v in bootstrap_ci([]))
    # one hit in 200: BCa degenerates, the percentile fallback still gives a finite interval
    lo, hi = bootstrap_ci([1.0] + [0.0] * 199)
    assert 0.0 <= lo <= 0.005 <= hi


def test_paired_permutation_detects_real_difference() -> None:
    rng = np.random.default_rng(2)
    a = rng.uniform(0, 1, 200)
    b = a + 0.1 + rng.normal(0, 0.05, 200)
    assert paired_permutation_p(b, a) < 0.01
    assert paired_permutation_p(a, b) < 0.01


def test_paired_permutation_same_distribution() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0, 1, 200), rng.uniform(0, 1, 200)
    assert paired_permutation_p(a, b) > 0.05
    assert paired_permutation_p(a, a.copy()) == 1.0
    assert paired_permutation_p([], []) == 1.0
    with pytest.raises(ValueError, match="differ"):
        paired_permutation_p([1.0, 2.0], [1.0])


def test_paired_permutation_rows_match_one_by_one() -> None:
    rng = np.random.default_rng(5)
    a = rng.uniform(0, 1, (3, 50))
    b = a + rng.normal(0.05, 0.2, (3, 50))
    b[2] = a[2]
    together = paired_permutation_pvalues(a, b, n_resamples=2000)
    alone = [paired_permutation_p(a[i], b[i], n_resamples=2000) for i in range(3)]
    assert together.tolist() == pytest.approx(alone)
    assert together[2] == 1.0


def test_paired_permutation_exact_for_few_queries() -> None:
    # 3 queries, all differences +1: of the 2**3 sign flips, only all-plus and all-minus are as extreme
    assert paired_permutation_p([1.0, 1.0, 1.0], [0.0, 0.0, 0.0]) == pytest.approx(2 / 8)


def test_holm_hand_computed() -> None:
    # sorted 0.01, 0.03, 0.04 -> 3*0.01, 2*0.03, max(0.06, 1*0.04)
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    assert holm({"a": 0.5, "b": 0.6}) == {"a": 1.0, "b": 1.0}
    assert holm({"only": 0.02}) == {"only": 0.02}
    assert holm({}) == {}


def test_percentile_ms() -> None:
    assert percentile_ms([10.0, 20.0, 30.0, 40.0], 50) == 25.0
    assert percentile_ms({"q1": 10.0, "q2": 30.0}, 100) == 30.0
    assert math.isnan(percentile_ms([], 95))


N_QUERIES = 60


def _arm(name: str, rank_of_relevant: list[int], leaks: dict[str, int] | None = None) -> ArmRun:
    rankings = {}
    for q, rank in enumerate(rank_of_relevant):
        ids = [f"noise{q}_{i}" for i in range(20)]
        ids.insert(rank, f"rel{q}")
        rankings[f"q{q}"] = [(doc_id, 1.0 / (i + 1)) for i, doc_id in enumerate(ids)]
    latency = {f"q{q}": 10.0 + q for q in range(N_QUERIES)}
    return ArmRun(arm=name, rankings=rankings, latency_ms=latency, leaks=leaks or {})


@pytest.fixture(scope="module")
def summary() -> EvalSummary:
    rng = np.random.default_rng(4)
    qrels = {f"q{q}": {f"rel{q}": 1} for q in range(N_QUERIES)} | {"q_unjudged": {"x": 0}}
    baseline_ranks = rng.integers(0, 15, N_QUERIES).tolist()
    better = [0 if rng.uniform() < 0.8 else r for r in baseline_ranks]
    same = rng.permutation(baseline_ranks).tolist()
    runs = [
        _arm("bm25", baseline_ranks),
        _arm("hybrid", better, leaks={"q0": 2, "q1": 1, "q2": 0}),
        _arm("shuffled", same),
    ]
    return summarize(qrels, runs, baseline="bm25", documents=1234)


def test_summary_p_values(summary: EvalSummary) -> None:
    assert summary.queries == N_QUERIES
    assert summary.unjudged == ["q_unjudged"]
    assert summary.arms["bm25"].p_vs_baseline == {}
    assert set(summary.arms["hybrid"].p_vs_baseline) == set(DEFAULT_METRICS)
    assert summary.arms["hybrid"].p_vs_baseline["ndcg@10"] < 0.01
    assert summary.arms["shuffled"].p_vs_baseline["ndcg@10"] > 0.05
    means = summary.arms["hybrid"].means
    assert set(means) == {*DEFAULT_METRICS, "context_precision@10", "context_recall@10"}
    assert means["ndcg@10"] > summary.arms["bm25"].means["ndcg@10"]
    for arm in summary.arms.values():
        for metric in DEFAULT_METRICS:
            lo, hi = arm.ci95[metric]
            assert lo <= arm.means[metric] <= hi


def test_summary_leaks_and_latency(summary: EvalSummary) -> None:
    hybrid = summary.arms["hybrid"]
    assert (hybrid.leaks, hybrid.queries_with_leaks) == (3, 2)
    assert (summary.arms["bm25"].leaks, summary.arms["bm25"].queries_with_leaks) == (0, 0)
    assert hybrid.p50_ms == pytest.approx(np.percentile([10.0 + q for q in range(N_QUERIES)], 50))
    assert hybrid.p95_ms == pytest.approx(np.percentile([10.0 + q for q in range(N_QUERIES)], 95))


def test_cli_json_shape(summary: EvalSummary) -> None:
    out = summary.cli_json()
    assert set(out) == {"arms", "queries", "documents"}
    assert (out["queries"], out["documents"]) == (N_QUERIES, 1234)
    assert list(out["arms"]) == ["bm25", "hybrid", "shuffled"]
    headline = ["ndcg@10", "recall@10", "recall@100", "mrr@10", "map@100"]
    for name, arm in out["arms"].items():
        assert list(arm) == [*headline, "p50_ms", "p95_ms", "ci95", "p_vs_baseline", "leaks", "queries_with_leaks"]
        assert arm["leaks"] == summary.arms[name].leaks
        assert list(arm["ci95"]) == headline
        assert all(isinstance(v, list) and len(v) == 2 for v in arm["ci95"].values())
        assert arm["ndcg@10"] == summary.arms[name].means["ndcg@10"]
    assert out["arms"]["bm25"]["p_vs_baseline"] is None
    assert out["arms"]["hybrid"]["p_vs_baseline"] == summary.arms["hybrid"].p_vs_baseline["ndcg@10"]
    json.dumps(out, allow_nan=False)


def test_per_query_frame(summary: EvalSummary) -> None:
    frame = summary.per_query
    assert frame is not None
    assert len(frame) == 3 * N_QUERIES
    assert list(frame.columns[:2]) == ["arm", "query_id"]
    assert {"latency_ms", "leaks", "ranked_ids", "context_precision@10"} <= set(frame.columns)
    row = frame[(frame["arm"] == "hybrid") & (frame["query_id"] == "q0")].iloc[0]
    assert row["leaks"] == 2
    assert len(row["ranked_ids"]) == 21
    # rank-derived scores: a ranking listed out of score order keeps its list order
    reordered = ArmRun("a", {"q": [("x", 0.1), ("rel", 0.9)]}, {"q": 1.0})
    assert per_query_frame({"q": {"rel": 1}}, [reordered]).loc[0, "mrr@10"] == 0.5


def test_summarize_rejects_unknown_baseline() -> None:
    with pytest.raises(ValueError, match="baseline"):
        summarize({"q": {"d": 1}}, [ArmRun("dense", {}, {})], baseline="bm25")


def test_markdown_table(summary: EvalSummary) -> None:
    table = markdown_table(summary)
    lines = table.splitlines()
    assert lines[0].startswith("| Arm")
    assert "bm25 (baseline)" in table
    hybrid = next(line for line in lines if line.startswith("| hybrid"))
    assert "**" in hybrid
    assert "3 (2 queries)" in hybrid
    shuffled = next(line for line in lines if line.startswith("| shuffled"))
    assert "*" not in shuffled
    assert "p < 0.05" in table and "Holm" in table


def test_write_report(summary: EvalSummary, tmp_path: Path) -> None:
    assert summary.per_query is not None
    paths = write_report(summary, summary.per_query, tmp_path / "out", "SciFact arms")
    assert set(paths) == {"report", "summary", "per_query", "ndcg_plot", "recall_plot"}
    for key in ("ndcg_plot", "recall_plot"):
        data = paths[key].read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000
    report = paths["report"].read_text()
    assert report.startswith("# SciFact arms")
    assert "](ndcg_at_10.png)" in report and "](recall_at_k.png)" in report
    assert all(name in report for name in ("bm25", "hybrid", "shuffled"))
    loaded = EvalSummary.model_validate_json(paths["summary"].read_text())
    assert loaded == summary
    assert "per_query" not in json.loads(paths["summary"].read_text())
    frame = pd.read_parquet(paths["per_query"])
    assert len(frame) == 3 * N_QUERIES
    assert list(frame.loc[0, "ranked_ids"])[:1] in (["rel0"], ["noise0_0"])


def test_recall_curves_from_summary(summary: EvalSummary, tmp_path: Path) -> None:
    path = plot_recall_curves(summary, tmp_path / "r.png")
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_a_single_paired_query_is_not_tested() -> None:
    # A mined set of one question: scipy refuses one observation; the comparison says p = 1, not an error.
    assert paired_permutation_p(np.array([1.0]), np.array([0.0])) == 1.0
