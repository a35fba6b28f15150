"""The Dagster internals the project uses (``rag_pipeline.runs.dagster_private``) still behave as it assumes: an
upgrade that moves or changes one fails here, by name, instead of somewhere in a run."""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

from rag_pipeline.runs import dagster_private as private


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
    # The batching storage serializes each event once for both shards with the base class's row builder.
    assert callable(getattr(private.SqliteEventLogStorage, "_event_to_row", None))
    assert "asset_key" in private.SqlEventLogStorageTable.c
    compute_logs = importlib.import_module(private.NOOP_COMPUTE_LOG_MANAGER_MODULE)
    assert hasattr(compute_logs, "NoOpComputeLogManager")


def test_both_event_logs_take_their_pool_slot_operations_from_the_sql_event_log() -> None:
    """runs/pool_claims.py wraps these methods once, on the common base, for the SQLite and the PostgreSQL logs: a
    storage that overrode one would bypass the lock."""
    from dagster_postgres import PostgresEventLogStorage

    wrapped = (
        "claim_concurrency_slot", "free_concurrency_slot_for_step", "free_concurrency_slots_for_run",
        "assign_pending_steps", "initialize_concurrency_limit_to_default", "set_concurrency_slots",
        "delete_concurrency_limit",
    )  # fmt: skip
    for storage in (private.SqliteEventLogStorage, PostgresEventLogStorage):
        assert issubclass(storage, private.SqlEventLogStorage)
        for name in wrapped:
            assert getattr(storage, name) is getattr(private.SqlEventLogStorage, name), (storage.__name__, name)


def test_instances_configured_before_the_event_storage_moved_are_updated(tmp_path, monkeypatch) -> None:
    from rag_pipeline.runs.instance import DAGSTER_YAML, MOVED_EVENT_STORAGE, ensure_dagster_home, open_instance
    from rag_pipeline.settings import Settings

    settings = Settings.from_env({"RAG_DATA_DIR": str(tmp_path)})
    home = settings.paths.dagster_home
    home.mkdir(parents=True)
    old = DAGSTER_YAML.format(home=home)
    (home / "dagster.yaml").write_text(old.replace("rag_pipeline.runs.event_storage", MOVED_EVENT_STORAGE))
    ensure_dagster_home(settings)
    assert (home / "dagster.yaml").read_text() == old
    with open_instance() as instance:
        assert type(instance.event_log_storage).__name__ == "BatchingSqliteEventLogStorage"


def test_a_copied_data_folder_records_its_runs_in_its_own_event_log(tmp_path, monkeypatch, caplog) -> None:
    """The config written for a folder names its event log by absolute path; a copy of the folder (a backup
    restored, a folder moved to another disk) must not go on writing into the original's."""
    from rag_pipeline.runs.instance import DAGSTER_YAML, ensure_dagster_home, open_instance
    from rag_pipeline.settings import Settings

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    original = Settings.from_env({"RAG_DATA_DIR": str(tmp_path / "original")})
    ensure_dagster_home(original)
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "original", copy)
    shutil.rmtree(tmp_path / "original")
    settings = Settings.from_env({"RAG_DATA_DIR": str(copy)})
    home = ensure_dagster_home(settings)
    assert (home / "dagster.yaml").read_text() == DAGSTER_YAML.format(home=home)
    with open_instance() as instance:
        assert Path(instance.event_log_storage._base_dir).resolve() == (home / "history" / "runs").resolve()
    assert not (tmp_path / "original").exists()

    # A config somebody edited is theirs, absolute paths and all: left as it is, with a warning naming both.
    edited = DAGSTER_YAML.format(home=tmp_path / "elsewhere").replace("max_retries: 1", "max_retries: 3")
    (home / "dagster.yaml").write_text(edited)
    with caplog.at_level("WARNING", logger="rag_pipeline.runs.instance"):
        ensure_dagster_home(settings)
    assert (home / "dagster.yaml").read_text() == edited
    assert f"{tmp_path / 'elsewhere'}/history/runs" in caplog.text and "was edited" in caplog.text
