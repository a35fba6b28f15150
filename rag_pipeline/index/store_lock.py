"""One opener at a time per embedded index folder, across processes: a bounded wait instead of a failure.

qdrant-edge locks each shard's write-ahead log with a non-blocking ``flock``, so a second opener of the
same folder (another process, or the same process twice) fails at once with ``Service runtime error:
failed to open WAL …/wal: Can't init WAL: Kind(WouldBlock)``. Searches and pipeline steps each hold the
folder for a short while, so a busy folder should make the next opener wait its turn, with a limit and a
message, rather than fail.

Before it loads a shard, the store takes an exclusive ``flock`` on ``<folder>/store.lock`` and keeps it
until it closes, so both shards (children and parents) are taken together, never one without the other.
The kernel drops the lock when its holder exits, killed or not, so a crash never leaves the folder locked
and there is no stale lock to clean up. The holder writes who it is into the file, so a waiting process
can say whom it is waiting for. Design and measurements: ``docs/notes/embedded_store_concurrency.md``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import random
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCK_FILE = "store.lock"
# One file per process waiting for the folder (named by its pid), so that a holder that hands the folder over
# (the search service) knows someone is waiting: a flock cannot tell its holder that another process wants it.
WAITING_DIR = "store.waiting"
# A waiter polls this often while the holder has said it hands the folder over, so the hand-over takes
# a few tens of milliseconds rather than the backed-off interval of a waiter behind a long write.
YIELDING_HOLDER_POLL_SECONDS = 0.05
# A wait this short is a normal turn-taking between two searches, and a message would only be noise.
FIRST_NOTICE_AFTER_SECONDS = 1.0
NOTICE_EVERY_SECONDS = 5.0
# Polling, not a blocking flock: a blocked flock cannot be given a deadline. The interval grows from
# 20 ms to this cap, so a search waiting behind another search gets in within a few milliseconds, and one
# waiting behind a long write adds at most this much latency after the write ends.
FIRST_POLL_SECONDS = 0.02
MAX_POLL_SECONDS = 0.5

log = logging.getLogger(__name__)

# The first words of the message qdrant-edge-py 0.9.0 raises when a shard's WAL is locked by another opener.
_WAL_LOCKED = "Can't init WAL: Kind(WouldBlock)"


@dataclass(frozen=True)
class LockHolder:
    """Who holds a folder: recorded in the lock file by the process that took it."""

    pid: int
    label: str
    since: float  # wall-clock seconds (time.time) when the lock was taken
    yields: bool = False  # the holder hands the folder to a waiting opener (the search service)

    def held_by(self, now: float | None = None) -> str:
        """``held by another process (pid 4242: rag-pipeline demo, Dagster run 1a2b3c4d, for 12 s)``."""
        held = max(0, round((time.time() if now is None else now) - self.since))
        if self.pid == os.getpid():
            # Two stores on one folder in one process wait for each other like two processes do.
            return f"held by this same process ({self.label}, for {held} s; a store opened twice?)"
        return f"held by another process (pid {self.pid}: {self.label}, for {held} s)"


def _held_by(holder: LockHolder | None) -> str:
    return holder.held_by() if holder else "held by another process"


class StoreBusyError(RuntimeError):
    """The embedded index stayed held by another opener for longer than the caller agreed to wait.

    Not a ``TimeoutError``: that is an ``OSError``, which error reporting reads as a network or system failure."""

    def __init__(self, folder: Path, waited: float, holder: LockHolder | None) -> None:
        self.folder = folder
        self.waited = waited
        self.holder = holder
        super().__init__(
            f"the index at {folder} is still {_held_by(holder)} after waiting {int(waited)} s "
            "(RAG_STORE_WAIT_SECONDS); run again when it is done, raise RAG_STORE_WAIT_SECONDS, or serve reads "
            "during writes from a Qdrant server (QDRANT_URL)"
        )


class ShardsBusy(Exception):
    """Raised by a loader when qdrant-edge refuses a shard because an opener outside this lock holds it."""


def is_wal_locked(exc: BaseException) -> bool:
    """Whether qdrant-edge refused to open a shard because another opener holds its write-ahead log."""
    return _WAL_LOCKED in str(exc)


def process_label() -> str:
    """The program and its subcommand (``rag-pipeline search``, ``dagster api``): enough to recognise the
    holder in a message, without arguments that may hold a query or a path."""
    return " ".join([Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:2]])


class FolderLock:
    """The exclusive lock of one embedded index folder, held from :meth:`try_acquire` to :meth:`release`."""

    def __init__(self, folder: Path, label: str, yields: bool = False) -> None:
        self.path = folder / LOCK_FILE
        self.label = label
        self.yields = yields
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if it is free (never blocks) and record this process as its holder."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        record = {"pid": os.getpid(), "label": self.label, "since": time.time(), "yields": self.yields}
        # The record only improves other processes' messages: a full disk must not fail the open.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        return True

    def release(self) -> None:
        """Give the folder back (idempotent). The record is cleared first, so a free lock names nobody."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def current_holder(self) -> LockHolder | None:
        """Who holds the folder now; None when nobody does. Unlike :meth:`holder`, a record left by a holder that
        was killed (the kernel dropped its lock, the file still names it) is not taken for a live one."""
        if self._fd is not None:
            return self.holder()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return self.holder()
        finally:
            os.close(fd)  # also drops the shared lock taken when nobody held it
        return None

    def holder(self) -> LockHolder | None:
        """Who holds the folder now, as its holder recorded it; None when unknown (not written yet, or free)."""
        try:
            record = json.loads(self.path.read_text())
            return LockHolder(
                int(record["pid"]), str(record["label"]), float(record["since"]), bool(record.get("yields", False))
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


class WaitingMarker:
    """This opener's sign that it waits for a folder: ``<folder>/store.waiting/<pid>-<random>`` while it waits.

    The waiter holds an exclusive ``flock`` on its marker for as long as it waits, so a holder can tell a live
    waiter from the marker of one that was killed (the kernel dropped its lock) without trusting pids, which
    are reused and differ between containers sharing the folder. The marker is written and locked under a
    hidden name, then renamed into place, so no holder ever sees it unlocked."""

    def __init__(self, folder: Path, label: str) -> None:
        self.directory = folder / WAITING_DIR
        self.path = self.directory / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.label = label
        self._fd: int | None = None

    def write(self) -> None:
        if self._fd is not None:
            return
        # Only a courtesy to a yielding holder: a folder that cannot take it must not fail the open.
        with contextlib.suppress(OSError):
            self.directory.mkdir(exist_ok=True)
            hidden = self.directory / f".{self.path.name}"
            fd = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                record = {"pid": os.getpid(), "label": self.label, "since": time.time()}
                os.write(fd, json.dumps(record).encode())
                os.rename(hidden, self.path)
            except OSError:
                os.close(fd)
                raise
            self._fd = fd

    def remove(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            os.close(fd)  # the lock goes with it


def waiting_openers(folder: Path) -> list[LockHolder]:
    """The openers now waiting for ``folder`` (oldest first), in any process. A marker whose lock is free
    belongs to a waiter that was killed (its ``finally`` never ran): it is removed here."""
    found = []
    try:
        entries = [e for e in (folder / WAITING_DIR).iterdir() if not e.name.startswith(".")]
    except OSError:
        return []
    for entry in entries:
        try:
            fd = os.open(entry, os.O_RDONLY)
        except OSError:
            continue  # removed meanwhile: that waiter got the folder or gave up
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                record = _read_record(fd)
                found.append(
                    LockHolder(
                        int(record.get("pid", 0)), str(record.get("label", "unknown")), float(record.get("since", 0))
                    )
                )
                continue
            with contextlib.suppress(OSError):
                entry.unlink()  # nobody holds it: a dead waiter's marker
        finally:
            os.close(fd)
    return sorted(found, key=lambda h: h.since)


def _read_record(fd: int) -> dict[str, Any]:
    try:
        record = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}


def acquire_folder(
    folder: Path,
    load: Callable[[], None],
    *,
    wait_seconds: float,
    label: str | None = None,
    on_wait: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    yields: bool = False,
) -> FolderLock:
    """Take ``folder``'s lock, then run ``load`` (which opens the shards), waiting up to ``wait_seconds``.

    While another process holds the folder, this polls with a growing interval and calls ``on_wait`` (by
    default this module's logger, at WARNING) with
    ``waiting for the index at X, held by another process (pid …: …, for 9 s) (5 s of 120 s)`` after the first
    second and then every few seconds. ``load`` raising :class:`ShardsBusy` (a shard held by an opener that
    does not take this lock) counts as busy too: the lock is given back and the wait goes on. Past the limit
    it raises :class:`StoreBusyError`; ``wait_seconds=0`` tries once.

    While it waits, a marker under ``store.waiting/`` tells a holder that hands the folder over (``yields``:
    the search service) that this process wants it; behind such a holder the poll stays short.
    """
    lock = FolderLock(folder, label or process_label(), yields=yields)
    # A yielding holder does not announce itself: two services on one folder would hand it back and forth.
    marker = None if yields else WaitingMarker(folder, lock.label)
    notify = on_wait or log.warning
    started = clock()
    next_notice = FIRST_NOTICE_AFTER_SECONDS
    poll = FIRST_POLL_SECONDS
    yielding_holder: LockHolder | None = None  # a service that handed the folder over, named once we have it
    try:
        while True:
            if lock.try_acquire():
                locked = clock()
                try:
                    load()
                    if yielding_holder is not None:
                        # Two figures: how long the holder took to hand the folder over, and this opener's own
                        # load of the shards (which it pays with or without a holder before it).
                        notify(
                            f"got the index at {folder} from pid {yielding_holder.pid} ({yielding_holder.label}) "
                            f"after {locked - started:.2f} s, then loaded it in {clock() - locked:.2f} s"
                        )
                    return lock
                except ShardsBusy:
                    lock.release()
                except BaseException:
                    lock.release()
                    raise
            waited = clock() - started
            if waited >= wait_seconds:
                raise StoreBusyError(folder, waited, lock.holder())
            if marker is not None:
                marker.write()
            holder = lock.holder()
            if holder is not None and holder.yields:
                yielding_holder = holder
            if waited >= next_notice:
                notify(f"waiting for the index at {folder}, {_held_by(holder)} ({int(waited)} s of {wait_seconds:g} s)")
                next_notice += NOTICE_EVERY_SECONDS
            # Jitter keeps several waiters from polling in lockstep behind the same holder.
            interval = YIELDING_HOLDER_POLL_SECONDS if holder is not None and holder.yields else poll
            sleep(min(interval * random.uniform(0.8, 1.2), max(0.0, wait_seconds - waited)))
            poll = min(poll * 2, MAX_POLL_SECONDS)
    finally:
        if marker is not None:
            marker.remove()
