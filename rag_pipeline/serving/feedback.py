"""Readers' judgements (opt-in, ``RAG_FEEDBACK_DAYS``): a reader says how relevant a document they were shown was
to what they asked. One JSON line per judgement under ``<data dir>/feedback/feedback-YYYY-MM-DD.jsonl`` (UTC
day): the time, the reader's account ids, the question, the document id and the grade (0 not relevant, 1 relevant,
2 exactly what was needed). Unlike the request audit, this keeps the question's text: that is what makes it an eval
set of real questions (:mod:`rag_pipeline.evaluation.feedback_set`). Files older than the retention are deleted
when the day changes, so nothing outlives the policy."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

_PREFIX = "feedback-"


class FeedbackDisabled(RuntimeError):
    """Feedback is off (``RAG_FEEDBACK_DAYS`` unset or 0)."""


def _day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d")


class FeedbackStore:
    """Appends judgements to the day's file in ``folder``; keeps ``retention_days`` days of files."""

    def __init__(self, folder: Path, retention_days: int, clock: Callable[[], float] = time.time) -> None:
        if retention_days < 1:
            raise ValueError("RAG_FEEDBACK_DAYS: keep readers' feedback at least 1 day (0 turns it off)")
        self.folder = Path(folder)
        self.retention_days = retention_days
        self._clock = clock
        self._lock = threading.Lock()
        self._pruned_day: str | None = None

    def record(self, reader_ids: Sequence[str], query: str, document_id: str, grade: int) -> dict[str, Any]:
        """Store one judgement (an OSError is the caller's: a reader whose feedback was not kept is told so)."""
        now = self._clock()
        entry = {
            "at": datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "reader": list(reader_ids),
            "query": query,
            "document": document_id,
            "grade": grade,
        }
        day = _day(now)
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            if day != self._pruned_day:
                self._prune(now)
                self._pruned_day = day
            with (self.folder / f"{_PREFIX}{day}.jsonl").open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
        return entry

    def _prune(self, now: float) -> None:
        oldest = _day(now - timedelta(days=self.retention_days - 1).total_seconds())
        for path in self.folder.glob(f"{_PREFIX}*.jsonl"):
            if path.stem[len(_PREFIX) :] < oldest:
                path.unlink(missing_ok=True)


def read_feedback(folder: Path) -> Iterator[dict[str, Any]]:
    """Every stored judgement, oldest day first (a line that does not parse is skipped: a crash mid-write)."""
    for path in sorted(Path(folder).glob(f"{_PREFIX}*.jsonl")):
        for line in path.read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict) and {"reader", "query", "document", "grade", "at"} <= set(entry):
                yield entry
