"""The optional per-request audit log: which documents each reader was given, never what they asked.

With ``RAG_SERVE_AUDIT_DAYS`` set, every search (HTTP, MCP, the chat routes) and every document read appends one
JSON line to ``<data dir>/request_audit/requests-YYYY-MM-DD.jsonl`` (UTC day): the time, the reader's account ids,
what was asked for (``search`` or ``document``) and the document ids returned. Query text is never written, so
the log can be kept and shown to an auditor without disclosing what people searched for. Files older than the
retention are deleted when the day changes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

log = logging.getLogger(__name__)

_PREFIX = "requests-"


def _day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d")


class RequestAudit:
    """Appends one line per request to the day's file in ``folder``; keeps ``retention_days`` days of files."""

    def __init__(self, folder: Path, retention_days: int, clock: Callable[[], float] = time.time) -> None:
        if retention_days < 1:
            raise ValueError("RAG_SERVE_AUDIT_DAYS: keep the request audit at least 1 day (0 turns it off)")
        self.folder = folder
        self.retention_days = retention_days
        self._clock = clock
        self._lock = threading.Lock()
        self._pruned_day: str | None = None
        self._failed = False

    def path_for(self, day: str) -> Path:
        return self.folder / f"{_PREFIX}{day}.jsonl"

    def record(self, reader_ids: Sequence[str], kind: str, document_ids: Sequence[str]) -> None:
        """One request's line. A failed write is logged (once until writes work again), never the caller's error."""
        now = self._clock()
        line = json.dumps(
            {
                "at": datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "reader": list(reader_ids),
                "kind": kind,
                "documents": list(document_ids),
            },
            ensure_ascii=False,
        )
        day = _day(now)
        with self._lock:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                if day != self._pruned_day:
                    self._prune(now)
                    self._pruned_day = day
                with self.path_for(day).open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
                self._failed = False
            except OSError as exc:
                if not self._failed:
                    log.error("the request audit could not be written (%s): %s", self.folder, type(exc).__name__)
                self._failed = True

    def _prune(self, now: float) -> None:
        oldest = _day(now - timedelta(days=self.retention_days - 1).total_seconds())
        for path in self.folder.glob(f"{_PREFIX}*.jsonl"):
            if path.stem[len(_PREFIX) :] < oldest:
                path.unlink(missing_ok=True)
