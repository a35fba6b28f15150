"""One open index shared by a long-running reader's concurrent queries, and handed to writers that need it.

The embedded engine (qdrant-edge) admits one opener per folder and an open costs 0.3–0.5 s at the demo's
size, so a service can neither hold the folder forever (a pipeline step would wait until its limit and fail)
nor open it per query (every query would pay the open). Instead (``docs/notes/serving.md``):

- the service keeps the store open between queries, as a *yielding* holder (recorded in ``store.lock``);
- an opener that finds the folder held leaves a marker in ``store.waiting/`` while it waits
  (``index/store_lock.py``), and polls every 50 ms when the holder yields;
- a watcher thread here sees the marker within ``poll_seconds``, stops new queries (they wait), lets
  running ones finish, closes the store and so hands the folder over;
- once no marker is left (the writer took the folder), it tries to reopen every ``poll_seconds``, and gets
  the folder back as soon as the writer closes it; waiting queries then run.

With a Qdrant server (``folder`` None) there is no lock: the store is opened once and kept.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from rag_pipeline.index.store import VectorStore
from rag_pipeline.index.store_lock import StoreBusyError, waiting_openers

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long an index that could not be used (missing, another model, a server down) waits before the next try:
# an open costs up to half a second, which a tight loop would spend for nothing.
RETRY_UNUSABLE_SECONDS = 5.0


class IndexUnavailable(RuntimeError):
    """No query can run now: the index is missing, unusable, or held by a writer for longer than a query waits."""


@dataclass
class HandOverStats:
    """What the hand-overs cost, for metrics and the notes."""

    hand_overs: int = 0
    last_open_seconds: float = 0.0  # the open itself: loading the shards and preparing the retriever
    opened_at: float | None = None  # wall-clock time of the last successful open


class SharedIndex(Generic[T]):
    """Holds the store that ``open_store`` opens and lends ``prepare(store)`` (a retriever) to queries.

    ``open_store`` must not wait for the folder itself (``wait_seconds=0``): this class does the waiting, so
    it can tell a held folder (retry soon) from an unusable index (retry later, report why). ``prepare``
    runs once per open and may raise to reject the index (another dense model): the reason is what
    :meth:`state` reports and what a query waiting past its limit is told."""

    def __init__(
        self,
        open_store: Callable[[], VectorStore],
        prepare: Callable[[VectorStore], T],
        folder: Path | None,
        *,
        ready: Callable[[], str | None] = lambda: None,
        poll_seconds: float = 0.05,
    ) -> None:
        self._open_store = open_store
        self._prepare = prepare
        self.folder = folder
        self._ready = ready  # a reason not to open yet (no index written), or None
        self.poll_seconds = poll_seconds
        self._cond = threading.Condition()
        self._store: VectorStore | None = None
        self._prepared: T | None = None
        self._readers = 0
        self._yielding = False
        self._reason: str | None = "the index has not been opened yet"
        # Set while the index cannot be used at all (missing, another model, an open that failed), as opposed to
        # held by a writer for a while: only the first makes the service unhealthy.
        self._unusable_reason: str | None = None
        self._next_try = 0.0
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.stats = HandOverStats()

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Try the first open now (so a service that can answer does so from its first request), then watch."""
        try:
            self._try_open()
        except Exception as exc:  # the watcher retries; the service starts and says why it cannot answer
            log.exception("the first open of the index failed")
            self._unusable(f"the index could not be opened: {type(exc).__name__}")
        self._watcher = threading.Thread(target=self._watch, name="shared-index-watcher", daemon=True)
        self._watcher.start()

    def close(self) -> None:
        """Stop watching and close the store (queries still running finish first)."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        with self._cond:
            self._yielding = True
            # Queries in flight finish first (bounded: a stuck one must not keep the process from exiting).
            self._cond.wait_for(lambda: not self._readers, timeout=30)
            self._close_store()
            self._reason = "the service is stopping"
            self._cond.notify_all()

    # --- queries -----------------------------------------------------------------------------------
    def state(self) -> tuple[str, str | None]:
        """``("open", None)``; ``("waiting", reason)`` while a writer has the folder (queries wait, and run once
        it is back); ``("unusable", reason)`` when no query can run until something changes (no index yet,
        another dense model, an open that failed); ``("starting", reason)`` before the first open."""
        with self._cond:
            if self._prepared is not None and not self._yielding:
                return "open", None
            if self._unusable_reason is not None:
                return "unusable", self._unusable_reason
            if self.stats.opened_at is None:
                return "starting", self._reason
            return "waiting", self._reason

    @contextmanager
    def reading(self, timeout: float) -> Iterator[tuple[T, float]]:
        """The prepared index and the seconds this query waited for it. Waits while a writer has the folder
        (at most ``timeout`` seconds, then :class:`IndexUnavailable` with the reason)."""
        started = time.monotonic()
        with self._cond:
            while self._prepared is None or self._yielding:
                remaining = timeout - (time.monotonic() - started)
                if remaining <= 0:
                    raise IndexUnavailable(self._reason or "the index is not open")
                self._cond.wait(remaining)
            prepared = self._prepared
            self._readers += 1
        waited = time.monotonic() - started
        try:
            yield prepared, waited
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    # --- the watcher -------------------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                if self._store is not None:
                    if self.folder is not None and waiting_openers(self.folder):
                        self._hand_over()
                elif time.monotonic() >= self._next_try:
                    self._try_open()
            except Exception:  # the watcher must outlive any one failure; queries see the reason
                log.exception("the shared index's watcher failed once; it goes on")

    def _hand_over(self) -> None:
        """Let running queries finish, then close the store so the waiting opener gets the folder."""
        with self._cond:
            self._yielding = True
            waiting = waiting_openers(self.folder) if self.folder is not None else []
            self._reason = "the index is being written" + (f" by {waiting[0].label}" if waiting else "")
            while self._readers:
                self._cond.wait()
            self._close_store()
        self.stats.hand_overs += 1
        log.info("handed the index to a waiting writer")

    def _try_open(self) -> None:
        """Open and prepare the store if the folder is free and nobody else is waiting for it."""
        if self.folder is not None and waiting_openers(self.folder):
            return  # a writer is queued: let it have the folder first
        not_ready = self._ready()
        if not_ready is not None:
            self._unusable(not_ready)
            return
        opening = time.monotonic()
        try:
            store = self._open_store()
        except StoreBusyError as exc:
            holder = exc.holder.label if exc.holder else "another process"
            with self._cond:
                self._reason = f"the index is held by {holder}"
            return  # retried at the next poll: the holder may be done any moment
        except Exception as exc:
            self._unusable(f"the index could not be opened: {type(exc).__name__}: {exc}")
            return
        try:
            prepared = self._prepare(store)
        except Exception as exc:
            try:
                store.close()
            finally:
                self._unusable(str(exc))
            return
        if self._stop.is_set():  # closed while this open ran: never publish a store nobody will close
            store.close()
            return
        self.stats.last_open_seconds = time.monotonic() - opening
        self.stats.opened_at = time.time()
        with self._cond:
            self._store, self._prepared = store, prepared
            self._yielding = False
            self._reason = self._unusable_reason = None
            self._cond.notify_all()

    def _unusable(self, reason: str) -> None:
        with self._cond:
            self._reason = self._unusable_reason = reason
        self._next_try = time.monotonic() + RETRY_UNUSABLE_SECONDS

    def _close_store(self) -> None:
        store, self._store, self._prepared = self._store, None, None
        if store is not None:
            store.close()
