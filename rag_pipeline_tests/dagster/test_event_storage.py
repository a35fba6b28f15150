"""The batching SQLite event log records exactly what Dagster's own SQLite event log records."""

from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.runs.event_storage import _entries_json, serialized_rows

daily = dg.DailyPartitionsDefinition(start_date="2024-01-01")
channels = dg.DynamicPartitionsDefinition(name="channels")
partitions = dg.MultiPartitionsDefinition({"date": daily, "channel": channels})


@dg.asset(partitions_def=partitions, backfill_policy=dg.BackfillPolicy.single_run())
def upstream(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"partitions": len(context.partition_keys)})


@dg.asset(partitions_def=partitions, backfill_policy=dg.BackfillPolicy.single_run(), deps=[upstream])
def downstream() -> dg.MaterializeResult:
    return dg.MaterializeResult()


def _run(home: Path, batching: bool, keep_events: bool = False) -> dict:
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
            "events": instance.all_logs(result.run_id) if keep_events else [],
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


def _sharing_metadata(events: list[dg.EventLogEntry]) -> list[dg.EventLogEntry]:
    """The events as a range run hands them over: each asset's materializations share one metadata's values
    (read back from the log, every event has its own copies)."""
    first: dict[dg.AssetKey, dict] = {}
    out = []
    for event in events:
        if event.dagster_event is None or not event.dagster_event.is_step_materialization:
            out.append(event)
            continue
        data = event.dagster_event.step_materialization_data
        shared = dict(first.setdefault(data.materialization.asset_key, dict(data.materialization.metadata)))
        materialization = data.materialization._replace(metadata=shared)
        out.append(
            event._replace(
                dagster_event=event.dagster_event._replace(
                    event_specific_data=data._replace(materialization=materialization)
                )
            )
        )
    return out


def test_each_metadata_is_serialized_once_and_every_row_is_what_dagster_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", "1000")
    events = _sharing_metadata(_run(tmp_path / "home", batching=True, keep_events=True)["events"])
    materializations = [e for e in events if e.dagster_event and e.dagster_event.is_step_materialization]
    assert len(materializations) == 160 and any(
        e.dagster_event.step_materialization_data.materialization.metadata for e in materializations
    )
    serialized: list[object] = []

    def event_to_row(event: dg.EventLogEntry) -> dict:
        serialized.append(event)
        return {"event": dg.serialize_value(event), "partition": event.dagster_event and event.dagster_event.partition}

    rows = serialized_rows(events, event_to_row)
    assert rows == [
        {"event": dg.serialize_value(e), "partition": e.dagster_event and e.dagster_event.partition} for e in events
    ]
    # Only the first of upstream's 80 materializations was serialized with its metadata.
    with_metadata = [
        e
        for e in serialized
        if e.dagster_event
        and e.dagster_event.is_step_materialization
        and e.dagster_event.step_materialization_data.materialization.metadata
    ]
    assert len(with_metadata) == 1
    assert dg.deserialize_value(rows[events.index(materializations[-1])]["event"]) == materializations[-1]


def test_a_splice_that_cannot_be_proven_identical_is_refused() -> None:
    bare = '{"a": 1, "metadata_entries": [], "b": 2}'
    assert _entries_json('{"a": 1, "metadata_entries": [{"x": 1}], "b": 2}', bare) == '[{"x": 1}]'
    assert _entries_json('{"a": 1, "metadata_entries": [{"x": 1}], "b": 3}', bare) is None  # another field differs
    assert _entries_json('{"a": 1, "metadata_entries": [], "metadata_entries": []}', bare * 2) is None


def test_a_real_range_run_serializes_its_metadata_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dagster hands over a range's materializations sharing the step's metadata values, which is what lets the
    storage serialize that metadata once: 80 partitions of ``upstream``, one metadata serialized."""
    import rag_pipeline.runs.event_storage as event_storage

    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", "1000")
    spliced: list[str | None] = []
    real = event_storage._entries_json

    def counting(full: str, bare: str) -> str | None:
        spliced.append(real(full, bare))
        return spliced[-1]

    monkeypatch.setattr(event_storage, "_entries_json", counting)
    result = _run(tmp_path / "home", batching=True, keep_events=True)
    assert result["records"] == 80
    assert len(spliced) == 1 and spliced[0] is not None and '"partitions"' in spliced[0]
