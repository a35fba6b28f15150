"""Readers' judgements (opt-in, ``RAG_FEEDBACK_DAYS``): a reader says how relevant a document they were shown was
to what they asked. One JSON line per judgement under ``<data dir>/feedback/feedback-YYYY-MM-DD.jsonl`` (UTC
day): the time, the reader's account ids, the question, the document id and the grade (0 not relevant, 1 relevant,
2 exactly what was needed). Unlike the request audit, this keeps the question's text: that is what makes it an eval
set of real questions (:mod:`rag_pipeline.evaluation.feedback_set`). Files older than the retention are deleted
when the day changes, so nothing outlives the policy."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rag_pipeline.serving.daily_log import DailyJsonLines, iso_z, read_daily_lines

_PREFIX = "feedback-"


class FeedbackDisabled(RuntimeError):
    """Feedback is off (``RAG_FEEDBACK_DAYS`` unset or 0)."""


class FeedbackStore:
    """Appends judgements to the day's file in ``folder``; keeps ``retention_days`` days of files."""

    def __init__(self, folder: Path, retention_days: int, clock: Callable[[], float] = time.time) -> None:
        self.lines = DailyJsonLines(folder, _PREFIX, retention_days, "RAG_FEEDBACK_DAYS: keep readers' feedback", clock)
        self.folder = self.lines.folder
        self.retention_days = retention_days

    def record(self, reader_ids: Sequence[str], query: str, document_id: str, grade: int) -> dict[str, Any]:
        """Store one judgement (an OSError is the caller's: a reader whose feedback was not kept is told so)."""
        now = self.lines.clock()
        entry = {"at": iso_z(now), "reader": list(reader_ids), "query": query, "document": document_id,
                 "grade": grade}  # fmt: skip
        self.lines.append(entry, now)
        return entry


def read_feedback(folder: Path) -> Iterator[dict[str, Any]]:
    """Every stored judgement, oldest day first (a line that does not parse is skipped: a crash mid-write)."""
    for entry in read_daily_lines(folder, _PREFIX):
        if {"reader", "query", "document", "grade", "at"} <= set(entry):
            yield entry
