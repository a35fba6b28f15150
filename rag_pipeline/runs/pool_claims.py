"""Pool slots that hold their limit when processes claim them at the same moment (SQLite instances).

Dagster's SQL event log claims a pool slot in check-then-act steps, each its own statement: a step is queued as
*assigned* when a count says a slot is unassigned (``has_unassigned_slots``, then ``add_pending_step``), and an
assigned step takes a slot by reading a free slot's id and then writing its run and step into that row, with no
condition that the row is still free (``_claim_concurrency_slot``). Freeing a slot and handing it to the next
queued step are three more separate statements. On SQLite, Python's driver begins a transaction only at the first
write, so none of these reads locks anything (``SELECT … FOR UPDATE`` is a no-op there): two orchestrators that
claim within a few milliseconds of each other can both be assigned, both read the same free slot and both write
it, and both steps run in a pool of limit 1. A loaded machine stretches those milliseconds (a process preempted
between the read and the write); docs/notes/celery_pool_overlap.md has the measurements.

:class:`SerializedPoolClaimsStorage` runs each of those operations whole under one exclusive ``flock`` on a file
beside the instance's databases, shared by every process that opens the instance (orchestrators, Celery
workers, the webserver, the daemon), so a claim sees the previous one's result. The lock is held for a few
statements (milliseconds), re-entered by the operations that call each other (a freed slot assigns the next
queued step), and dropped by the kernel when its holder dies.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from rag_pipeline.runs.dagster_private import SqliteEventLogStorage

# Beside the event log's index database: every process that opens the instance opens this same file.
POOL_LOCK_FILE = "pool_slots.lock"


class ProcessSharedLock:
    """An exclusive lock across processes (``flock``) and threads, re-entrant within a thread.

    The file is opened on the outermost acquisition and closed on the last release: closing the only descriptor
    of the open file drops its ``flock``, and a process that dies holding it loses it with its descriptors."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._threads = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def __enter__(self) -> ProcessSharedLock:
        self._threads.acquire()
        try:
            if self._depth == 0:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._depth += 1
        except BaseException:
            self._threads.release()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self._depth -= 1
            if self._depth == 0 and self._fd is not None:
                fd, self._fd = self._fd, None
                os.close(fd)
        finally:
            self._threads.release()


class SerializedPoolClaimsStorage(SqliteEventLogStorage):
    """Dagster's SQLite event log whose pool-slot operations run one at a time across the processes that share it.

    Only the operations that read the slots and queue and then write them are serialized; reading pool state
    (the UI's pool page, ``get_concurrency_info``) is not."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self.pool_lock = ProcessSharedLock(Path(base_dir) / POOL_LOCK_FILE)
        super().__init__(base_dir, inst_data=inst_data)

    def claim_concurrency_slot(
        self, concurrency_key: str, run_id: str, step_key: str, priority: int | None = None
    ) -> Any:
        with self.pool_lock:
            return super().claim_concurrency_slot(concurrency_key, run_id, step_key, priority)

    def free_concurrency_slot_for_step(self, run_id: str, step_key: str) -> None:
        with self.pool_lock:
            super().free_concurrency_slot_for_step(run_id, step_key)

    def free_concurrency_slots_for_run(self, run_id: str) -> None:
        with self.pool_lock:
            super().free_concurrency_slots_for_run(run_id)

    def assign_pending_steps(self, concurrency_keys: Sequence[str]) -> None:
        with self.pool_lock:
            super().assign_pending_steps(concurrency_keys)

    def initialize_concurrency_limit_to_default(self, concurrency_key: str) -> bool:
        with self.pool_lock:
            return bool(super().initialize_concurrency_limit_to_default(concurrency_key))

    def set_concurrency_slots(self, concurrency_key: str, num: int) -> None:
        with self.pool_lock:
            super().set_concurrency_slots(concurrency_key, num)

    def delete_concurrency_limit(self, concurrency_key: str) -> None:
        with self.pool_lock:
            super().delete_concurrency_limit(concurrency_key)
