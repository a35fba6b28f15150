"""Pool slots that hold their limit when processes claim them at the same moment.

Dagster's SQL event log claims a pool slot in check-then-act steps, each its own statement: a step is queued as
*assigned* when a count says a slot is unassigned (``has_unassigned_slots``, then ``add_pending_step``), and an
assigned step takes a slot by reading a free slot's id and then writing its run and step into that row, with no
condition that the row is still free (``_claim_concurrency_slot``). Freeing a slot and handing it to the next
queued step are three more separate statements. On SQLite, Python's driver begins a transaction only at the first
write, so none of these reads locks anything (``SELECT … FOR UPDATE`` is a no-op there); dagster-postgres runs
every statement in AUTOCOMMIT, so its ``FOR UPDATE`` row lock ends with the ``SELECT`` that took it. Either way two
orchestrators that claim within a few milliseconds of each other can both be assigned, both read the same free
slot and both write it, and both steps run in a pool of limit 1. A loaded machine stretches those milliseconds (a
process preempted between the read and the write); docs/notes/celery_pool_overlap.md has the measurements.

:class:`SerializedPoolClaims` runs each of those operations whole under one lock that every process opening the
instance shares (orchestrators, Celery workers, the webserver, the daemon), so a claim sees the previous one's
result. The lock is held for a few statements (milliseconds), re-entered by the operations that call each other (a
freed slot assigns the next queued step), and dropped when its holder dies. Which lock depends on the database:
an ``flock`` on a file beside a SQLite instance's databases (:class:`SerializedPoolClaimsStorage`, here) or a
PostgreSQL advisory lock (:mod:`rag_pipeline.runs.pool_claims_postgres`).
"""

from __future__ import annotations

import fcntl
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from rag_pipeline.runs.dagster_private import SqlEventLogStorage, SqliteEventLogStorage

# Beside the event log's index database: every process that opens the instance opens this same file.
POOL_LOCK_FILE = "pool_slots.lock"


class ReentrantHeldLock(ABC):
    """An exclusive lock across processes, re-entrant within a thread and exclusive between a process's threads.

    The lock that other processes see (a file's ``flock``, a database's advisory lock) is taken on the outermost
    acquisition in a thread and dropped on its last release (:meth:`_take`, :meth:`_drop`); nested acquisitions only
    count. Re-entry matters: a freed slot assigns the next queued step under the same hold, and taking the shared
    lock a second time from the thread that holds it (a second descriptor, a second database session) would wait
    for itself."""

    def __init__(self) -> None:
        self._threads = threading.RLock()
        self._depth = 0

    @abstractmethod
    def _take(self) -> None:
        """Wait for and take the shared lock."""

    @abstractmethod
    def _drop(self) -> None:
        """Release the shared lock."""

    def __enter__(self) -> Self:
        self._threads.acquire()
        try:
            if self._depth == 0:
                self._take()
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
            if self._depth == 0:
                self._drop()
        finally:
            self._threads.release()


class ProcessSharedLock(ReentrantHeldLock):
    """An exclusive ``flock`` on a file, re-entrant within a thread.

    The file is opened on the outermost acquisition and closed on the last release: closing the only descriptor
    of the open file drops its ``flock``, and a process that dies holding it loses it with its descriptors."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._fd: int | None = None

    def _take(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _drop(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


class SerializedPoolClaims(SqlEventLogStorage):
    """Mixin for a Dagster SQL event log: its pool-slot operations run whole under ``pool_lock``.

    Put it before the event log class in the bases and set ``pool_lock`` before that class's ``__init__`` runs.
    Only the operations that read the slots and queue and then write them are serialized; reading pool state
    (the UI's pool page, ``get_concurrency_info``) is not."""

    pool_lock: ReentrantHeldLock

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


class SerializedPoolClaimsStorage(SerializedPoolClaims, SqliteEventLogStorage):
    """Dagster's SQLite event log whose pool-slot operations run one at a time across the processes that share it,
    under an ``flock`` on ``<base_dir>/pool_slots.lock``."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self.pool_lock = ProcessSharedLock(Path(base_dir) / POOL_LOCK_FILE)
        super().__init__(base_dir, inst_data=inst_data)
