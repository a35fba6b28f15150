"""Is retrieval getting worse? nDCG@10 per arm per week of the mined questions, the two drop tests, and the
``retrieval_quality_over_time`` asset and check in a real Dagster run over a report history."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from rag_pipeline.defs.evaluation.quality import CHECK, build_quality_over_time
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set
from rag_pipeline.evaluation.quality_over_time import paired_drop, recent_drop, weekly_quality

WEEKS = [f"2024-{m:02d}-{d:02d}" for m, d in ((1, 1), (1, 8), (1, 15), (1, 22), (1, 29), (2, 5), (2, 12), (2, 19))]


def _queries() -> list[EvalQuery]:
    return [
        EvalQuery(id=f"threads:q{w}-{i}", query=f"question {i}", relevant={"d": 1}, tags=["mined", "threads", "slack",
                  "lang:latin", f"week:{w}"])
        for w in WEEKS for i in range(12)
    ]  # fmt: skip


def _scores(queries: list[EvalQuery], recent_score: float, seed: int = 0) -> pd.DataFrame:
    """Per-query nDCG@10 of two arms: hybrid steady around 0.7; bm25 around 0.6, or ``recent_score`` in the last
    four weeks."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in queries:
        week = q.tags[-1].removeprefix("week:")
        rows.append({"arm": "hybrid", "query_id": q.id, "ndcg@10": float(np.clip(rng.normal(0.7, 0.1), 0, 1))})
        mean = recent_score if week >= WEEKS[-4] else 0.6
        rows.append({"arm": "bm25", "query_id": q.id, "ndcg@10": float(np.clip(rng.normal(mean, 0.1), 0, 1))})
    return pd.DataFrame(rows)


def _weeks(queries: list[EvalQuery]) -> dict[str, str]:
    return {q.id: q.tags[-1].removeprefix("week:") for q in queries}


def test_weekly_table_and_the_recent_weeks_test() -> None:
    queries = _queries()
    steady = _scores(queries, recent_score=0.6)
    table = weekly_quality(steady, _weeks(queries))
    assert len(table) == len(WEEKS) * 2 and set(table["queries"]) == {12}
    assert not recent_drop(steady, _weeks(queries)).failed
    worse = _scores(queries, recent_score=0.35)
    report = recent_drop(worse, _weeks(queries))
    (failed,) = report.failed
    assert failed.arm == "bm25" and failed.drop > 0.2 and failed.p_value < 0.01
    assert failed.queries == (48, 48)
    # Better recently is no failure; too few weeks to compare says so.
    assert not recent_drop(_scores(queries, recent_score=0.9), _weeks(queries)).failed
    few = recent_drop(worse, _weeks(queries), recent_weeks=len(WEEKS))
    assert not few.drops and "nothing earlier" in few.note


def test_the_same_questions_answered_worse_is_a_paired_drop() -> None:
    queries = _queries()
    before = _scores(queries, recent_score=0.6)
    after = before.copy()
    after.loc[after["arm"] == "hybrid", "ndcg@10"] -= 0.05
    (failed,) = paired_drop(before, after).failed
    assert failed.arm == "hybrid" and failed.drop == pytest.approx(0.05)
    # A drop under the tolerance is noise, however significant.
    slight = before.copy()
    slight.loc[slight["arm"] == "hybrid", "ndcg@10"] -= 0.01
    assert not paired_drop(before, slight).failed


def _history(reports: Path, stamp: str, frame: pd.DataFrame) -> None:
    folder = reports / "history" / stamp / "mined_threads"
    folder.mkdir(parents=True)
    frame.to_parquet(folder / "per_query.parquet", index=False)


@pytest.mark.parametrize("worse", [False, True], ids=["steady", "worse"])
def test_the_asset_charts_the_weeks_and_its_check_fails_on_a_drop(tmp_path: Path, worse: bool) -> None:
    queries = _queries()
    mined = tmp_path / "mined" / "sets"
    meta = EvalSetMeta(name="mined_threads", description="", source="", license="", attribution="",
                       queries=len(queries), tags=["mined", "chat"])  # fmt: skip
    write_eval_set(mined, meta, queries)
    reports = tmp_path / "reports"
    _history(reports, "20240301T000000Z", _scores(queries, recent_score=0.6, seed=1))
    _history(reports, "20240308T000000Z", _scores(queries, recent_score=0.35 if worse else 0.6, seed=2))
    report = dg.AssetSpec("retrieval_eval_report")
    asset = build_quality_over_time(report)  # type: ignore[arg-type]
    evaluation = EvaluationResource(eval_dir=str(tmp_path), reports_dir=str(reports), mined_dir=str(mined))
    result = dg.materialize([asset], resources={"evaluation": evaluation}, raise_on_error=False)
    assert result.success
    metadata = result.asset_materializations_for_node("retrieval_quality_over_time")[0].metadata
    assert "data:image/png;base64," in metadata["mined_threads/chart"].value
    assert "2024-02-19" in metadata["mined_threads/weeks"].value
    assert (reports / "quality_over_time" / "mined_threads.png").stat().st_size > 5000
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == CHECK and check.passed is not worse
    failures = check.metadata["failures"].value
    assert bool(failures) is worse and (not worse or "bm25" in failures[0])
