"""The evaluation assets in real Dagster runs on a real slice of the bundled Slack data.

One (channel, day) partition of the bundled export is indexed; the eval set is the real dev queries
whose thread is in that slice, plus the same queries as principals that may and may not read them.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from rag_pipeline.defs.chain.resources import DenseEmbedderResource
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, load_eval_set, write_eval_set
from rag_pipeline.retrieval.calibration import Calibration
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.rerank.learned import BAG, REG_LAMBDA
from rag_pipeline.retrieval.results import MODES
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline_tests.kit.pipeline import cell, chain, evaluation, resources, settings_for

SLACK_ASSETS = chain("slack")
EVALUATION = evaluation()
reranker_model, retrieval_eval, retrieval_eval_report = EVALUATION.assets
CELL = cell("slack_threads", "C0UBUNTU00", "2004-11-16")
MEMBERS = "slack:T0UBUNTU:members"


class UnloadableEmbedder(DenseEmbedderResource):
    """The index's model, whose weights cannot be loaded (the retriever falls back to BM25)."""

    def encoder(self) -> DenseEncoder:
        raise OSError("model weights are missing")


def _meta(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node(asset)[0].metadata.items()}


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {c.check_name: c for c in result.get_asset_check_evaluations()}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("eval_data")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("slack_channels", ["C0UBUNTU00"])
        result = dg.materialize(SLACK_ASSETS, instance=instance, resources=resources(data), **CELL)
        assert result.success
    return data


@pytest.fixture(scope="module")
def eval_sets(indexed: Path) -> Path:
    folder = indexed / "eval_sets"
    dev = load_eval_set(settings_for().eval_dir / "slack_ubuntu_dev.jsonl")
    # threads started on 2004-11-16 (UTC): their thread_ts is the last part of the document id
    slice_queries = [q for q in dev if any(1100563200 <= float(d.split(":")[-1]) < 1100649600 for d in q.relevant)]
    assert len(slice_queries) >= 5
    meta = dict(source="test", license="CC-BY-4.0", attribution="Kummerfeld et al.")
    write_eval_set(
        folder,
        EvalSetMeta(
            name="slice", description="dev queries of the slice", queries=len(slice_queries), sources=["slack"], **meta
        ),
        slice_queries,
    )
    acl = [
        EvalQuery(
            id=f"{who}:{q.id}",
            query=q.query,
            relevant=q.relevant if groups else {},
            principal=Principal(user_id=f"U_{who}", groups=groups),
            tags=["acl"],
        )
        for q in slice_queries
        for who, groups in (("member", (MEMBERS,)), ("outsider", ()))
    ]
    write_eval_set(
        folder, EvalSetMeta(name="slice_acl", description="acl", queries=len(acl), tags=["acl"], **meta), acl
    )
    return folder


def _resources(data: Path, eval_folder: Path, **overrides) -> dict:
    res = resources(data)
    settings = {
        "reports_dir": str(data / "reports"),
        "folds": 3,
        "quality_floors": {"slice": 0.2, "slice_acl": 0.2},
        **overrides,
    }
    res["evaluation"] = EvaluationResource(eval_dir=str(eval_folder), **settings)
    return res


def _evaluate(instance, res: dict, arms=MODES) -> dg.ExecuteInProcessResult:
    exact = res["evaluation"].exact_dense
    for arm in arms:
        done = dg.materialize([retrieval_eval], instance=instance, resources=res, partition_key=arm)
        assert done.success
        # Every arm says which dense search it ran on: the index's HNSW unless the evaluation asked for exact.
        assert _meta(done, "retrieval_eval")["dense_search"] == (
            "exact" if exact else "hnsw (m=16, ef_construct=100, ef=128)"
        )
        # And which BM25 query and fusion: the Slack-only set fuses with Slack's learned RRF, the set
        # without a source (both sources) with the global one.
        metadata = _meta(done, "retrieval_eval")
        if arm != "vector":
            assert metadata["sparse_query"] == "fielded(title=4,body=1,k3=1.2,body_text=prose)"
        if arm == "prf":
            assert metadata["prf"] == "rm3(hybrid, docs=10, terms=10, original=0.5)"
        if arm in ("hybrid", "reranked", "prf"):
            assert metadata["slice/fusion"] == "rrf(k=10, weights=1.6/0.4)"
            assert metadata["slice_acl/fusion"] == "rrf(k=60, weights=1/1/0.5)"
        else:
            assert "slice/fusion" not in metadata
        # The step log says how far each eval set's phase is (done/total, rate), so a long arm is never silent.
        said = [e.user_message for e in instance.all_logs(done.run_id) if not e.is_dagster_event]
        finished = [m for m in said if "(100%)" in m and m.endswith("/s")]
        assert any(m.startswith(f"slice {arm}: ") for m in finished), "\n".join(said)
        if arm == "reranked":
            assert any(m.startswith("slice reranker training data: ") for m in said)
            assert any(m.startswith("slice training cross-fitted rerankers: ") for m in finished), "\n".join(said)
    return dg.materialize([retrieval_eval_report], instance=instance, resources=res, raise_on_error=False)


def test_eval_assets_report_and_checks(indexed: Path, eval_sets: Path) -> None:
    res = _resources(indexed, eval_sets)
    with dg.instance_for_test() as instance:
        model = dg.materialize([reranker_model], instance=instance, resources=res)
        meta = _meta(model, "reranker_model")
        assert meta["version"].startswith("lambdarank-") and meta["training_queries"] >= 5
        assert meta["term_tokenizer"] == "word"  # the index's BM25 tokenizer (the resource's default)
        assert all(
            (indexed / "reports" / "reranker" / meta["version"] / f"model-{i}.txt").exists() for i in range(meta["bag"])
        )
        # The values bench.reranker_tuning chose once (issue 48), never searched per training set.
        assert meta["bag"] == BAG and meta["reg_lambda"] == REG_LAMBDA

        report = _evaluate(instance, res)
        assert report.success
        meta = _meta(report, "retrieval_eval_report")
        arms = {row.data["arm"]: row.data for row in meta["slice/arms"].records}
        assert set(arms) == set(MODES)
        assert all(0.0 < a["ndcg@10"] <= 1.0 and a["ci95_low"] <= a["ndcg@10"] <= a["ci95_high"] for a in arms.values())
        assert arms["bm25"]["p_vs_baseline"] is None and arms["hybrid"]["p_vs_baseline"] is not None
        assert "data:image/png;base64," in meta["slice/report"]
        assert set(meta["slice/json"]["arms"]) == set(MODES)
        # The outsider may read nothing: every ACL query of theirs must come back empty, never leak.
        runs = indexed / "reports" / "runs"
        hybrid_acl = pd.read_parquet(runs / "hybrid" / "slice_acl.parquet")
        outsider = hybrid_acl[hybrid_acl.query_id.str.startswith("outsider:")]
        member = hybrid_acl[hybrid_acl.query_id.str.startswith("member:")]
        assert len(outsider) and all(len(ids) == 0 for ids in outsider.document_ids)
        assert all(len(ids) > 0 for ids in member.document_ids)
        checks = _checks(report)
        assert checks["quality_floor"].passed and checks["acl_no_leaks"].passed
        assert checks["no_regression"].passed  # first report: nothing to compare against
        latest = indexed / "reports" / "latest" / "slice"
        assert (latest / "ndcg_at_10.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        first = json.loads((indexed / "reports" / "latest_summary.json").read_text())
        # The report fitted each mode's score to P(relevant) (what min_score filters on), from the judged results.
        calibration = Calibration.load(indexed / "reports" / "calibration.json")
        assert calibration is not None and set(calibration.modes) <= set(MODES) and "bm25" in calibration.modes
        assert calibration.eval_sets and set(meta["calibrated_modes"]) == set(calibration.modes)
        bm25 = calibration.modes["bm25"]
        assert 0 < bm25.positives < bm25.pairs and list(bm25.y) == sorted(bm25.y)

        # Same index, same settings: the second report compares against the first and passes.
        again = _evaluate(instance, res, arms=["bm25"])
        assert _checks(again)["no_regression"].passed
        assert _checks(again)["no_regression"].metadata["compared_arms"].value == 2 * len(MODES)

        # The evaluation may ask for exact dense search (reported per arm, see _evaluate): on an index this small
        # the engine scans its one plain segment either way, so the vector arm scores exactly as before.
        exact = _evaluate(instance, _resources(indexed, eval_sets, exact_dense=True), arms=["vector"])
        assert _checks(exact)["no_regression"].passed
        exact_summary = json.loads((indexed / "reports" / "latest_summary.json").read_text())
        assert exact_summary["slice"]["arms"]["vector"]["means"] == first["slice"]["arms"]["vector"]["means"]

        # Degrade the vector arm (its dense model cannot load, so it falls back to BM25): the regression
        # check must trip when the vector arm was better than BM25 by more than the tolerance.
        vector, bm25 = (first["slice"]["arms"][a]["means"]["ndcg@10"] for a in ("vector", "bm25"))
        assert vector - bm25 > 0.05, "the slice no longer separates dense from BM25; pick another slice"
        broken = _resources(indexed, eval_sets, regression_tolerance=0.05)
        broken["dense_embedder"] = UnloadableEmbedder(cache_path=str(indexed / "embedding_cache.sqlite"))
        degraded = _evaluate(instance, broken, arms=["vector"])
        assert not degraded.success or not _checks(degraded)["no_regression"].passed
        regression = _checks(degraded)["no_regression"]
        assert not regression.passed
        assert any("slice/vector" in r for r in regression.metadata["regressions"].value)

        # Editing an eval set makes its saved runs stale: the report must not pass on them.
        slice_file = eval_sets / "slice.jsonl"
        slice_file.write_text(
            slice_file.read_text() + EvalQuery(id="new", query="x", relevant={"d": 1}).model_dump_json() + "\n"
        )
        stale = dg.materialize([retrieval_eval_report], instance=instance, resources=res, raise_on_error=False)
        floor = _checks(stale)["quality_floor"]
        assert not floor.passed
        assert any(
            "slice: no current run for vector, bm25, hybrid, reranked" in f for f in floor.metadata["failures"].value
        )


def test_every_arm_in_one_run_shares_searches_and_a_failed_arm_leaves_the_others(
    indexed: Path, eval_sets: Path, tmp_path: Path, monkeypatch
) -> None:
    """Issue 48: the evaluation runs every arm in one run (a partition range); each arm's saved rankings are those
    of its own run, the step reports each (eval set, arm), and an arm that raises fails the step but leaves the
    other arms' runs saved and named in the log."""
    from rag_pipeline.pipeline.tags import RANGE_END_TAG, RANGE_START_TAG
    from rag_pipeline.runs.evaluation import step_failure_reason

    def rankings(reports: Path) -> dict:
        return {
            (arm, name): pd.read_parquet(reports / "runs" / arm / f"{name}.parquet")[
                ["query_id", "document_ids"]
            ].to_json()
            for arm in MODES
            for name in ("slice", "slice_acl")
            if (reports / "runs" / arm / f"{name}.parquet").exists()
        }

    alone = _resources(indexed, eval_sets, reports_dir=str(tmp_path / "alone"))
    together = _resources(indexed, eval_sets, reports_dir=str(tmp_path / "together"))
    every_arm = {RANGE_START_TAG: MODES[0], RANGE_END_TAG: MODES[-1]}
    with dg.instance_for_test() as instance:
        for arm in MODES:
            assert dg.materialize([retrieval_eval], instance=instance, resources=alone, partition_key=arm).success
        done = dg.materialize([retrieval_eval], instance=instance, resources=together, tags=every_arm)
        assert done.success
        assert {m.partition for m in done.asset_materializations_for_node("retrieval_eval")} == set(MODES)
        metadata = _meta(done, "retrieval_eval")
        assert {(r.data["eval_set"], r.data["arm"]) for r in metadata["eval_sets"].records} == {
            (name, arm) for name in ("slice", "slice_acl") for arm in MODES
        }
        assert all(0.0 <= metadata[f"slice/{arm}/ndcg@10"] <= 1.0 for arm in MODES)
        assert rankings(tmp_path / "together") == rankings(tmp_path / "alone")
        assert len(rankings(tmp_path / "alone")) == 2 * len(MODES)
        # Split over two processes (a child on a copy of the index): the same rankings.
        monkeypatch.setattr("rag_pipeline.evaluation.parallel.MIN_PARALLEL_QUERIES", 0)
        split = _resources(indexed, eval_sets, reports_dir=str(tmp_path / "split"), workers=2)
        done = dg.materialize([retrieval_eval], instance=instance, resources=split, tags=every_arm)
        assert done.success and _meta(done, "retrieval_eval")["eval_workers"] == 2
        shares = _meta(done, "retrieval_eval")["eval_shares"]
        assert len(shares) == 2 and all(name in " ".join(shares) for name in ("slice", "slice_acl"))
        assert rankings(tmp_path / "split") == rankings(tmp_path / "alone")

        def broken(*args, **kwargs):
            raise RuntimeError("LightGBM ran out of memory")

        monkeypatch.setattr("rag_pipeline.evaluation.evaluate.cross_fitted_rerankers", broken)
        failing = _resources(indexed, eval_sets, reports_dir=str(tmp_path / "failing"))
        failed = dg.materialize(
            [retrieval_eval], instance=instance, resources=failing, tags=every_arm, raise_on_error=False
        )
        assert not failed.success
        saved = rankings(tmp_path / "failing")
        assert {arm for arm, _ in saved} == set(MODES) - {"reranked"}
        assert all(saved[key] == value for key, value in rankings(tmp_path / "alone").items() if key[0] != "reranked")
        said = [e.user_message for e in instance.all_logs(failed.run_id) if not e.is_dagster_event]
        assert any("arm reranked failed: RuntimeError: LightGBM ran out of memory" in m for m in said)
        # What the demo prints on its stderr and in its --json names the arm too, not only the UI.
        assert "slice/reranked" in step_failure_reason(failed) and "slice_acl/reranked" in step_failure_reason(failed)
