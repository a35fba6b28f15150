"""The Dagster instance the in-process runners use, and the switches that make big ranges cheap."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline.pipeline.retained import TemporaryWrites
from rag_pipeline.pipeline.tags import RANGE_END_TAG, RANGE_START_TAG
from rag_pipeline.runs.dagster_private import NOOP_COMPUTE_LOG_MANAGER_MODULE
from rag_pipeline.settings import Settings

# The runners' own instance (used only when DAGSTER_HOME is unset): SQLite, with the event log that
# writes a range's materializations in one transaction (10x faster than one event at a time), and
# without per-step stdout capture (it spawns two `tail` processes per step; structured event logs
# are kept). Run monitoring only acts where `dagster dev` (its daemon) runs on this home: it frees the
# slots of UI-launched runs whose worker died; the runners recover their own runs (runs/recovery.py).
DAGSTER_YAML = (
    """telemetry:
  enabled: false
nux:
  enabled: false
event_log_storage:
  module: rag_pipeline.runs.event_storage
  class: BatchingSqliteEventLogStorage
  config:
    base_dir: {home}/history/runs
compute_logs:
  module: """
    + NOOP_COMPUTE_LOG_MANAGER_MODULE
    + """
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
)

log = logging.getLogger(__name__)

# Taken while a process opens (and so may create) the instance's SQLite databases: see open_instance.
INSTANCE_LOCK = "instance.lock"
# The DAGSTER_HOME that ensure_dagster_home exported for this process (the one DagsterInstance.get() opens).
_home: Path | None = None

# Dagster logs every event of thousands of partitions; the runners report progress themselves. CRITICAL, not
# WARNING: the runners also report failures themselves (one line per failed run or container), and at ERROR
# the console logger would print each step failure again with Dagster's stack trace. The console logger only
# echoes events: the instance's event log (the UI) still records every event and step log message.
QUIET_RUN_CONFIG: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


# Where the runners' event storage lived before it moved beside the instance code.
MOVED_EVENT_STORAGE = "rag_pipeline.defs.event_storage"


def _write_whole(config: Path, text: str) -> None:
    """Written whole, then renamed: a second command starting at the same moment would otherwise read an
    empty or half-written file and open an instance with Dagster's defaults."""
    fd, temp = tempfile.mkstemp(dir=config.parent, prefix=".dagster.yaml.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temp, config)


def ensure_dagster_home(settings: Settings) -> Path:
    """DAGSTER_HOME if set, else ``<data dir>/dagster_home`` (created with the runners' instance config).

    Dagster's own ``DagsterInstance.get()`` reads DAGSTER_HOME, so it is exported for this process.
    """
    home = (settings.dagster_home or settings.paths.dagster_home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        _write_whole(config, DAGSTER_YAML.format(home=home))
    else:
        written = config.read_text(encoding="utf-8")
        # Instances written before the event storage moved from defs/ to runs/ name its old module.
        current = written.replace(MOVED_EVENT_STORAGE, "rag_pipeline.runs.event_storage")
        # A data folder copied or moved elsewhere still names the old folder's event log in the config written
        # for it: its runs would be recorded there (or in a folder since deleted) while its run list is here.
        # Only the runners' own config is re-pointed; one somebody edited is theirs.
        base_dir = re.search(r"^    base_dir: (.+)/history/runs$", current, flags=re.MULTILINE)
        if base_dir and base_dir[1] != str(home):
            if current == DAGSTER_YAML.format(home=base_dir[1]):
                current = DAGSTER_YAML.format(home=home)
            else:
                log.warning(
                    "%s names the event log of another folder (%s/history/runs) and was edited, so it is left "
                    "as it is: runs of this data folder are recorded there",
                    config,
                    base_dir[1],
                )
        if current != written:
            _write_whole(config, current)
    os.environ["DAGSTER_HOME"] = str(home)
    global _home  # what open_instance locks (only Settings reads the environment)
    _home = home
    return home


@contextmanager
def open_instance() -> Iterator[dg.DagsterInstance]:
    """``DagsterInstance.get()`` (the instance of DAGSTER_HOME), opened by one process at a time where
    :func:`ensure_dagster_home` set that home.

    Opening a SQLite instance creates its databases on first use, and Dagster's check-then-create is not atomic
    across processes: two commands starting together on a new data folder both found ``runs.db`` without an
    alembic revision, the second after the first had created the tables but before it stamped them, and the
    second stamped the old revision Dagster gives tables it finds without one. ``alembic_version`` then held two
    revisions, and every later command on that folder failed with "Version table 'alembic_version' has more
    than one head present" (docs/notes/skipped_records.md). An exclusive ``flock`` on
    ``<DAGSTER_HOME>/instance.lock`` around the opening (which creates the run, event log and schedule
    databases) makes creation happen once; runs themselves still go on side by side. The kernel drops the lock
    with its process, so a crash never leaves it held.
    """
    lock: int | None = None
    # A home this process cannot write: nothing can be created there, so there is nothing to serialize. Without
    # ensure_dagster_home (a caller that set DAGSTER_HOME itself) there is no lock either.
    with contextlib.suppress(OSError):
        lock = os.open(_home / INSTANCE_LOCK, os.O_RDWR | os.O_CREAT, 0o644) if _home else None
    try:
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # blocking: opening takes a second at most
        instance = dg.DagsterInstance.get()
        try:
            # The storages are what creates the databases; touched here, inside the lock, whether Dagster
            # builds them at once or on first use.
            _ = (instance.run_storage, instance.event_log_storage, instance.schedule_storage)
        except BaseException:
            instance.dispose()
            raise
    finally:
        if lock is not None:
            os.close(lock)  # closing the descriptor releases the flock
    with instance:
        yield instance


def enable_range_batching() -> None:
    """One planned event per asset per range run instead of one per partition (Dagster's documented
    switch for single-run backfills), and materialization events handed to the event log in batches."""
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", "1000")


def range_tags(start: str, end: str, **extra: str) -> dict[str, str]:
    """Tags of one single-run backfill over the partition range ``start``..``end``."""
    return {RANGE_START_TAG: start, RANGE_END_TAG: end, **extra}


# Retention of the instance config's temporary files (:func:`_write_whole` killed half-way).
INSTANCE_CONFIG_WRITES = TemporaryWrites(lambda settings: settings.paths.dagster_home, ".dagster.yaml.*.tmp")
