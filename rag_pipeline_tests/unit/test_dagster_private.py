"""The Dagster internals the project uses (``rag_pipeline.defs.dagster_private``) still behave as it assumes: an
upgrade that moves or changes one fails here, by name, instead of somewhere in a run."""

from __future__ import annotations

import importlib
import inspect
import re
from datetime import UTC, datetime

from rag_pipeline.defs import dagster_private as private


def test_the_cron_iterators_step_forward_and_back_from_an_instant() -> None:
    start = datetime(2024, 3, 5, 10, 30, tzinfo=UTC).timestamp()
    forward = private.cron_string_iterator(start, "0 * * * *", "UTC")
    assert [next(forward).isoformat() for _ in range(2)] == ["2024-03-05T11:00:00+00:00", "2024-03-05T12:00:00+00:00"]
    back = private.reverse_cron_string_iterator(start, "0 * * * *", "UTC")
    assert next(back).isoformat() == "2024-03-05T10:00:00+00:00"


def test_run_failure_data_names_the_reasons_recovery_tells_apart() -> None:
    assert {"RUN_EXCEPTION", "STEP_FAILURE", "UNEXPECTED_TERMINATION"} <= {r.name for r in private.RunFailureReason}
    data = private.JobFailureData(error=None, failure_reason=private.RunFailureReason.UNEXPECTED_TERMINATION)
    assert data.failure_reason is private.RunFailureReason.UNEXPECTED_TERMINATION


def test_the_in_process_executor_builds_its_concurrency_context_by_name() -> None:
    # runs/execution.py swaps the executor module's InstanceConcurrencyContext for a watched one.
    assert private.in_process_executor.InstanceConcurrencyContext is private.InstanceConcurrencyContext
    assert "InstanceConcurrencyContext(" in inspect.getsource(private.in_process_executor)
    assert callable(private.pop_captured_interrupt) and private.pop_captured_interrupt() is False


def test_run_ids_and_the_event_log_storage_are_what_the_runners_extend() -> None:
    assert re.fullmatch(r"[0-9a-f-]{36}", private.make_new_run_id())
    assert callable(getattr(private.SqliteEventLogStorage, "from_config_value", None))
    assert hasattr(private.SqliteEventLogStorage, "store_event") and private.SQLITE_BUSY_TIMEOUT_SECONDS > 0
    assert "asset_key" in private.SqlEventLogStorageTable.c
    compute_logs = importlib.import_module(private.NOOP_COMPUTE_LOG_MANAGER_MODULE)
    assert hasattr(compute_logs, "NoOpComputeLogManager")


def test_instances_configured_before_the_event_storage_moved_are_updated(tmp_path, monkeypatch) -> None:
    from rag_pipeline.runs.instance import DAGSTER_YAML, ensure_dagster_home, open_instance
    from rag_pipeline.settings import Settings

    settings = Settings.from_env({"RAG_DATA_DIR": str(tmp_path)})
    home = settings.paths.dagster_home
    home.mkdir(parents=True)
    old = DAGSTER_YAML.format(home=home)
    (home / "dagster.yaml").write_text(
        old.replace("rag_pipeline.runs.event_storage", "rag_pipeline.runs.event_storage")
    )
    ensure_dagster_home(settings)
    assert "rag_pipeline.runs.event_storage" in (home / "dagster.yaml").read_text()
    with open_instance() as instance:
        assert type(instance.event_log_storage).__name__ == "BatchingSqliteEventLogStorage"
