"""Every Dagster internal (``dagster._…``) the project relies on, in one place.

Dagster's public API covers almost everything here; these few names have no public equivalent in Dagster 1.13
(pinned in pyproject.toml). Importing them from this module alone means an upgrade that moves or changes one
breaks here, at import, and in ``rag_pipeline_tests/unit/runs/test_dagster_private.py``, which checks each name still
behaves as the code below assumes. It lives with the runners, its main users; the Dagster wiring (``defs/``) imports
it too (the runners never import the wiring but through ``runs/code_location.py``).

- cron iterators: the sync sensor and ``status`` plan from the cron ticks around now (``runs/sync_runs.py``'s
  ``cron_window``);
- run failure data: recovery tells a crashed run from a failed one (``runs/recovery.py``, ``runs/execution.py``);
- the in-process executor's concurrency context, the run id factory and captured interrupts: the runners watch
  pool slots and Ctrl-C while a run executes in this process (``runs/execution.py``);
- the SQLite event log's table and storage class: the event storage that waits for a busy database
  (``runs/event_storage.py``) and retention's per-run event log files (``runs/retention.py``);
- the SQL event log base class, which both the SQLite and the PostgreSQL event logs derive from: the pool-slot
  lock wraps its claim and free methods once for both (``runs/pool_claims.py``);
- the type of an unresolved asset job (only for type checking, ``defs/chain/source_spec.py``).
"""

from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from dagster._core.events import JobFailureData, RunFailureReason
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.executor import in_process as in_process_executor
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SQLITE_BUSY_TIMEOUT_SECONDS, SqliteEventLogStorage
from dagster._core.utils import make_new_run_id
from dagster._utils.interrupts import pop_captured_interrupt
from dagster._utils.schedules import cron_string_iterator, reverse_cron_string_iterator

# The module path of Dagster's no-op compute log manager, as the runners' instance config names it.
NOOP_COMPUTE_LOG_MANAGER_MODULE = "dagster._core.storage.noop_compute_log_manager"

__all__ = [
    "NOOP_COMPUTE_LOG_MANAGER_MODULE",
    "SQLITE_BUSY_TIMEOUT_SECONDS",
    "InstanceConcurrencyContext",
    "JobFailureData",
    "RunFailureReason",
    "SqlEventLogStorage",
    "SqlEventLogStorageTable",
    "SqliteEventLogStorage",
    "UnresolvedAssetJobDefinition",
    "cron_string_iterator",
    "in_process_executor",
    "make_new_run_id",
    "pop_captured_interrupt",
    "reverse_cron_string_iterator",
]
