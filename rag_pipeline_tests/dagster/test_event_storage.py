"""The batching SQLite event log records exactly what Dagster's own SQLite event log records."""

from pathlib import Path

import dagster as dg
import pytest

daily = dg.DailyPartitionsDefinition(start_date="2024-01-01")
channels = dg.DynamicPartitionsDefinition(name="channels")
partitions = dg.MultiPartitionsDefinition({"date": daily, "channel": channels})


@dg.asset(partitions_def=partitions, backfill_policy=dg.BackfillPolicy.single_run())
def upstream(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"partitions": len(context.partition_keys)})


@dg.asset(partitions_def=partitions, backfill_policy=dg.BackfillPolicy.single_run(), deps=[upstream])
def downstream() -> dg.MaterializeResult:
    return dg.MaterializeResult()


def _run(home: Path, batching: bool) -> dict:
    config = "telemetry:\n  enabled: false\n"
    if batching:
        config += (
            "event_log_storage:\n  module: rag_pipeline.runs.event_storage\n  class: BatchingSqliteEventLogStorage\n"
            f"  config:\n    base_dir: {home}/history/runs\n"
        )
    home.mkdir()
    (home / "dagster.yaml").write_text(config)
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        instance.add_dynamic_partitions("channels", ["C1", "C2"])
        result = dg.materialize(
            [upstream, downstream],
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": "C1|2024-01-01",
                "dagster/asset_partition_range_end": "C2|2024-02-09",
            },
        )
        assert result.success
        storage = type(instance.event_log_storage).__name__
        return {
            "storage": storage,
            "materialized": {
                k: instance.get_materialized_partitions(dg.AssetKey(k)) for k in ("upstream", "downstream")
            },
            "records": len(instance.fetch_materializations(dg.AssetKey("downstream"), limit=1000).records),
            "run_events": len(instance.all_logs(result.run_id)),
            "has_latest": instance.get_latest_materialization_event(dg.AssetKey("upstream")) is not None,
        }


def test_batching_event_log_matches_dagsters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", "1000")
    plain = _run(tmp_path / "plain", batching=False)
    batched = _run(tmp_path / "batched", batching=True)
    assert (plain["storage"], batched["storage"]) == ("SqliteEventLogStorage", "BatchingSqliteEventLogStorage")
    assert len(batched["materialized"]["downstream"]) == 80  # 2 channels x 40 days
    assert batched["materialized"] == plain["materialized"]
    assert batched["records"] == plain["records"] == 80
    assert batched["run_events"] == plain["run_events"]
    assert batched["has_latest"] and plain["has_latest"]
