"""The Dagster instance the in-process runners use, and the switches that make big ranges cheap."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rag_pipeline.defs.sync_runs import RANGE_END_TAG, RANGE_START_TAG
from rag_pipeline.settings import Settings

# The runners' own instance (used only when DAGSTER_HOME is unset): SQLite, with the event log that
# writes a range's materializations in one transaction (10x faster than one event at a time), and
# without per-step stdout capture (it spawns two `tail` processes per step; structured event logs
# are kept). Run monitoring only acts where `dagster dev` (its daemon) runs on this home: it frees the
# slots of UI-launched runs whose worker died; the runners recover their own runs (runs/recovery.py).
DAGSTER_YAML = """telemetry:
  enabled: false
nux:
  enabled: false
event_log_storage:
  module: rag_pipeline.defs.event_storage
  class: BatchingSqliteEventLogStorage
  config:
    base_dir: {home}/history/runs
compute_logs:
  module: dagster._core.storage.noop_compute_log_manager
  class: NoOpComputeLogManager
concurrency:
  pools:
    default_limit: 1
run_retries:
  enabled: true
  max_retries: 1
run_monitoring:
  enabled: true
  poll_interval_seconds: 30
  free_slots_after_run_end_seconds: 60
  max_resume_run_attempts: 0
"""

# Dagster logs every event of thousands of partitions; the runners report progress themselves. CRITICAL, not
# WARNING: the runners also report failures themselves (one line per failed run or container), and at ERROR
# the console logger would print each step failure again with Dagster's stack trace. The console logger only
# echoes events: the instance's event log (the UI) still records every event and step log message.
QUIET_RUN_CONFIG: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def ensure_dagster_home(settings: Settings) -> Path:
    """DAGSTER_HOME if set, else ``<data dir>/dagster_home`` (created with the runners' instance config).

    Dagster's own ``DagsterInstance.get()`` reads DAGSTER_HOME, so it is exported for this process.
    """
    home = (settings.dagster_home or settings.paths.dagster_home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(DAGSTER_YAML.format(home=home), encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def enable_range_batching() -> None:
    """One planned event per asset per range run instead of one per partition (Dagster's documented
    switch for single-run backfills), and materialization events handed to the event log in batches."""
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", "1000")


def range_tags(start: str, end: str, **extra: str) -> dict[str, str]:
    """Tags of one single-run backfill over the partition range ``start``..``end``."""
    return {RANGE_START_TAG: start, RANGE_END_TAG: end, **extra}
