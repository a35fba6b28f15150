"""The optional per-request audit log: which documents each reader was given, never what they asked.

With ``RAG_SERVE_AUDIT_DAYS`` set, every search (HTTP, MCP, the chat routes) and every document read appends one
JSON line to ``<data dir>/request_audit/requests-YYYY-MM-DD.jsonl`` (UTC day): the time, the reader's account ids,
what was asked for (``search`` or ``document``) and the document ids returned. Query text is never written, so
the log can be kept and shown to an auditor without disclosing what people searched for. Files older than the
retention are deleted when the day changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rag_pipeline.serving.daily_log import DailyJsonLines, iso_z

log = logging.getLogger(__name__)

_PREFIX = "requests-"


class RequestAudit:
    """Appends one line per request to the day's file in ``folder``; keeps ``retention_days`` days of files."""

    def __init__(self, folder: Path, retention_days: int, clock: Callable[[], float] = time.time) -> None:
        self.lines = DailyJsonLines(
            folder, _PREFIX, retention_days, "RAG_SERVE_AUDIT_DAYS: keep the request audit", clock
        )
        self.folder = folder
        self.retention_days = retention_days
        self._failed = False

    def path_for(self, day: str) -> Path:
        return self.lines.path_for(day)

    def record(self, reader_ids: Sequence[str], kind: str, document_ids: Sequence[str]) -> None:
        """One request's line. A failed write is logged (once until writes work again), never the caller's error."""
        now = self.lines.clock()
        entry = {"at": iso_z(now, "milliseconds"), "reader": list(reader_ids), "kind": kind,
                 "documents": list(document_ids)}  # fmt: skip
        try:
            self.lines.append(entry, now)
            self._failed = False
        except OSError as exc:
            if not self._failed:
                log.error("the request audit could not be written (%s): %s", self.folder, type(exc).__name__)
            self._failed = True
