"""The real Dagster machinery on small slices: materialize, checks, idempotency, no regression."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.chain.discovery import build_offline_source_discovery_sensor
from rag_pipeline.defs.parts import source_specs
from rag_pipeline.defs.slack.resources import SlackExportResource
from rag_pipeline_tests.kit.data import D1, TEAM, ts, write_slack_export
from rag_pipeline_tests.kit.pipeline import cell, chain, resources, settings_for

SLACK_ASSETS = chain("slack")
JIRA_ASSETS = chain("jira")


def _resources(data_dir: Path, slack_export: Path | None = None) -> dict:
    res = resources(data_dir)
    if slack_export is not None:
        # A new instance, not model_copy: Dagster keeps resource config outside the pydantic fields.
        res["slack_export"] = res["slack_source"] = SlackExportResource(path=str(slack_export), team_id=TEAM)
    return res


def _meta(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node(asset)[0].metadata.items()}


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions("slack_channels", ["C0PUB", "G0PRIV", "C0UBUNTU00"])
        inst.add_dynamic_partitions("jira_projects", ["DAEMON"])
        yield inst


def test_definitions_load_and_every_asset_is_described() -> None:
    defs = build_definitions(settings_for())
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    raws = (
        ("slack", "slack_threads"),
        ("jira", "jira_issues"),
        ("confluence", "confluence_pages"),
        ("tools", "tool_definitions"),
    )
    for source, raw in raws:
        chain = [
            raw,
            f"{source}_parent_chunks",
            f"{source}_child_chunks",
            f"{source}_dense_vectors",
            f"{source}_sparse_vectors",
            f"{source}_qdrant_points",
        ]
        assert set(chain) <= keys
    directories = {"slack_directory", "jira_directory", "confluence_directory"}
    for node in graph.asset_nodes:
        groups = ("slack", "jira", "confluence", "tools", "evaluation", "access")
        assert node.group_name in groups and node.kinds and node.description
        if node.key.to_user_string() in directories:
            # Who exists now: one unpartitioned asset per source, in its group, hourly, with a freshness policy
            # and a check on the records it had to skip.
            assert node.partitions_def is None and node.group_name == node.key.to_user_string().split("_")[0]
            assert node.automation_condition is not None and node.freshness_policy is not None
            assert [c.name for c in node.check_keys] == ["records_usable"]
        elif node.group_name == "access":
            # Who gained or lost access after each directory sync: unpartitioned, with its mass-change check.
            assert node.partitions_def is None and [c.name for c in node.check_keys] == ["no_mass_access_change"]
        elif node.group_name != "evaluation":
            assert node.partitions_def is not None and node.backfill_policy is not None
    assert directories <= keys
    eval_node = graph.get(dg.AssetKey("retrieval_eval"))
    assert set(eval_node.partitions_def.get_partition_keys()) == {"vector", "bm25", "hybrid", "reranked", "prf"}
    assert {p.to_user_string() for p in eval_node.parent_entity_keys} == {
        "slack_qdrant_points",
        "jira_qdrant_points",
        "confluence_qdrant_points",
    }
    assert eval_node.pools == {"qdrant"}
    points = graph.get(dg.AssetKey("slack_qdrant_points"))
    assert points.pools == {"qdrant"}
    # Parallel Slack partitions share one API budget.
    assert graph.get(dg.AssetKey("slack_threads")).pools == {"slack_api"}
    # The titles are embedded from the raw documents, next to the child chunks.
    assert {p.to_user_string() for p in graph.get(dg.AssetKey("slack_dense_vectors")).parent_entity_keys} == {
        "slack_child_chunks",
        "slack_threads",
    }


def test_bundled_slack_partition_chain(tmp_path: Path, instance) -> None:
    res = _resources(tmp_path)
    result = dg.materialize(
        SLACK_ASSETS, instance=instance, resources=res, **cell("slack_threads", "C0UBUNTU00", "2004-11-16")
    )
    assert result.success
    raw, children = _meta(result, "slack_threads"), _meta(result, "slack_child_chunks")
    dense, points = _meta(result, "slack_dense_vectors"), _meta(result, "slack_qdrant_points")
    assert raw["documents"] == 21 and raw["bad_records"] == 0
    # One vector per child chunk, plus one per document title (the title prefetch of hybrid search).
    assert dense["title_vectors"] == 21 and children["child_chunks"] > 21
    assert dense["vectors"] == children["child_chunks"] + 21 == dense["embeddings_computed"]
    assert points["title_vectors"] is True
    assert children["model_token_limit"] == 256
    assert points["documents_written"] == 21 and points["collection_parents_points"] >= 21
    assert points["collection_children_points"] == children["child_chunks"]
    assert dense["backend"] == "openvino (f32)" or dense["backend"].startswith("openvino (bf16")
    assert points["dense_search"] == "hnsw (m=16, ef_construct=100, ef=128)" and points["optimize_seconds"] >= 0
    checks = result.get_asset_check_evaluations()
    assert {c.check_name for c in checks} == {"parents_have_text", "children_have_text", "children_have_parents"}
    assert all(c.passed for c in checks)
    # One file for the week (2004-11-16 is a Tuesday), its rows labelled with their day and channel.
    assert (tmp_path / "parquet" / "slack_child_chunks" / "2004-11-15.parquet").exists()
    assert instance.get_materialized_partitions(dg.AssetKey("slack_qdrant_points")) == {"2004-11-15"}

    # Re-materialization: same point ids and counts, zero new embeddings.
    from rag_pipeline.index.edge_store import EdgeVectorStore
    from rag_pipeline.index.store import CollectionNames

    def point_ids() -> set[str]:
        with EdgeVectorStore(tmp_path / "qdrant", CollectionNames.with_prefix("rag")) as store:
            ids = [d for d in _docs(tmp_path)]
            return {r.id for r in store.document_points(store.names.children, ids)}

    before = point_ids()
    again = dg.materialize(
        SLACK_ASSETS, instance=instance, resources=res, **cell("slack_threads", "C0UBUNTU00", "2004-11-16")
    )
    assert _meta(again, "slack_dense_vectors")["embeddings_computed"] == 0
    assert _meta(again, "slack_dense_vectors")["embeddings_cached"] == dense["vectors"]
    assert _meta(again, "slack_qdrant_points")["points_removed"] == 0
    assert _meta(again, "slack_qdrant_points")["collection_children_points"] == points["collection_children_points"]
    assert point_ids() == before and len(before) == children["child_chunks"]


def _docs(data_dir: Path) -> list[str]:
    import pandas as pd

    return [
        d
        for f in (data_dir / "parquet" / "slack_threads").rglob("*.parquet")
        for d in pd.read_parquet(f)["document_id"]
    ]


def test_range_run_writes_every_partition_in_one_run(tmp_path: Path, instance, slack_export: Path) -> None:
    res = _resources(tmp_path, slack_export)
    result = dg.materialize(
        SLACK_ASSETS,
        instance=instance,
        resources=res,
        tags={
            "dagster/asset_partition_range_start": "2024-02-26",
            "dagster/asset_partition_range_end": "2024-03-04",
        },
        run_config={"ops": {"slack_threads": {"config": {"containers": ["C0PUB"]}}}},
    )
    assert result.success
    # One step per asset, one materialization per week.
    assert len(result.asset_materializations_for_node("slack_qdrant_points")) == 2
    assert instance.get_materialized_partitions(dg.AssetKey("slack_child_chunks")) == {"2024-02-26", "2024-03-04"}
    import pandas as pd

    week = pd.read_parquet(tmp_path / "parquet" / "slack_threads" / "2024-02-26.parquet")
    assert week.groupby("_day").size().to_dict() == {"2024-03-01": 2, "2024-03-02": 1}
    assert set(week["_container"]) == {"C0PUB"}
    # A week without documents has no file.
    assert not (tmp_path / "parquet" / "slack_threads" / "2024-03-04.parquet").exists()
    assert _meta(result, "slack_qdrant_points")["documents_written"] == 3


def test_older_partition_rerun_does_not_regress_newer_version(tmp_path: Path, instance) -> None:
    root = ts(D1 + 100)
    old_days = {
        "2024-03-01": [
            {"type": "message", "user": "U1", "text": "my disk is full", "ts": root},
            {"type": "message", "user": "U2", "text": "run du -sh", "ts": ts(D1 + 200), "thread_ts": root},
        ]
    }
    new_days = {
        **old_days,
        "2024-03-05": [
            {
                "type": "message",
                "user": "U1",
                "text": "late reply: it was the journal logs",
                "ts": ts(D1 + 4 * 86400 + 60),
                "thread_ts": root,
            }
        ],
    }
    old_export = write_slack_export(tmp_path / "old", old_days)
    new_export = write_slack_export(tmp_path / "new", new_days)
    data = tmp_path / "data"
    # The late reply moves the thread to 2024-03-05 (the partition of its latest activity).
    newer = dg.materialize(
        SLACK_ASSETS,
        instance=instance,
        resources=_resources(data, new_export),
        **cell("slack_threads", "C0PUB", "2024-03-05"),
    )
    assert _meta(newer, "slack_qdrant_points")["documents_written"] == 1
    # Re-running the old day with the old state of the thread must not overwrite the newer version.
    older = dg.materialize(
        SLACK_ASSETS,
        instance=instance,
        resources=_resources(data, old_export),
        **cell("slack_threads", "C0PUB", "2024-03-01"),
    )
    meta = _meta(older, "slack_qdrant_points")
    assert (meta["documents_written"], meta["documents_skipped_older"], meta["points_removed"]) == (0, 1, 0)
    from rag_pipeline.index.edge_store import EdgeVectorStore
    from rag_pipeline.index.store import CollectionNames, SearchFilter

    with EdgeVectorStore(data / "qdrant", CollectionNames.with_prefix("rag")) as store:
        doc_id = f"slack:{TEAM}:C0PUB:{root}"
        refs = store.document_points(store.names.parents, [doc_id])
        texts = [h.payload["text"] for h in store.retrieve(store.names.parents, [r.id for r in refs])]
        assert len(texts) == 1 and "journal logs" in texts[0]
        assert store.count(store.names.children, SearchFilter(document_ids=(doc_id,))) >= 1


def test_jira_partition_chain_on_bundled_dump(tmp_path: Path, instance) -> None:
    result = dg.materialize(
        JIRA_ASSETS, instance=instance, resources=_resources(tmp_path), **cell("jira_issues", "DAEMON", "2017-02-14")
    )
    assert result.success
    raw = _meta(result, "jira_issues")
    points = _meta(result, "jira_qdrant_points")
    assert raw["documents"] >= 1 and points["documents_written"] == raw["documents"]
    assert all(c.passed for c in result.get_asset_check_evaluations())


def test_discovery_sensor_adds_offline_containers(tmp_path: Path, slack_export: Path) -> None:
    res = _resources(tmp_path, slack_export)
    with dg.instance_for_test() as inst:
        context = dg.build_sensor_context(
            instance=inst,
            resources={
                "slack_export": res["slack_export"],
                "jira_dump": res["jira_dump"],
                "confluence_dump": res["confluence_dump"],
                "tools_files": res["tools_files"],
            },
        )
        offline_source_discovery_sensor = build_offline_source_discovery_sensor(
            list(source_specs(settings_for()).values())
        )
        result = offline_source_discovery_sensor(context)
        added = {r.partitions_def_name: set(r.partition_keys) for r in result.dynamic_partitions_requests}
        assert added["slack_channels"] == {"C0PUB", "G0PRIV"}
        assert added["jira_projects"] == {"AC", "ALOY", "DAEMON", "MOD", "TIMOB"}
        assert json.loads(result.cursor)["channels"] == ["C0PUB", "G0PRIV"]
        inst.add_dynamic_partitions("slack_channels", ["C0PUB", "G0PRIV"])
        inst.add_dynamic_partitions("jira_projects", ["AC", "ALOY", "DAEMON", "MOD", "TIMOB"])
        assert offline_source_discovery_sensor(context).dynamic_partitions_requests == []


def test_io_manager_serves_a_runs_own_outputs_from_memory(tmp_path: Path, instance, monkeypatch) -> None:
    import pandas as pd

    import rag_pipeline.defs.chain.io_manager as io_manager

    reads: list[str] = []
    real_read = pd.read_parquet
    monkeypatch.setattr(
        io_manager.pd, "read_parquet", lambda path, **kw: reads.append(str(path)) or real_read(path, **kw)
    )
    res = _resources(tmp_path)
    key = "2004-11-15"
    assert dg.materialize(
        SLACK_ASSETS, instance=instance, resources=res, **cell("slack_threads", "C0UBUNTU00", "2004-11-16")
    ).success
    assert reads == []  # every input came from the step that wrote it in this run
    downstream = [a.key for a in SLACK_ASSETS if a.key.path[0] != "slack_threads"]
    result = dg.materialize(
        SLACK_ASSETS, selection=downstream, instance=instance, resources=_resources(tmp_path), partition_key=key
    )
    assert result.success
    # A later run reads the raw partition from disk (once per consumer), everything else from memory again.
    # Consumers: parent chunks, child chunks, dense vectors (the titles) and the points.
    assert len(reads) == 4 and all(r.endswith("slack_threads/2004-11-15.parquet") for r in reads)
    assert _meta(result, "slack_qdrant_points")["points_removed"] == 0
