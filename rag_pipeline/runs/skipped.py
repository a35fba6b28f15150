"""What a command skipped: the records the readers and the shared checks turned away, told where the user looks.

The problems are the readers' own :class:`RecordProblem` lists (file/line/record and reason), the ones the raw
assets report as ``bad_records`` metadata: ``index``/``demo`` collect them from the whole read of each offline
source (the read every run's raw step reuses, plus :func:`admit_documents`, the raw step's checks), ``sync``
from its runs' raw step metadata. The full list is written under the data folder, one JSON object per line
with the keys of the ``--json`` examples, replaced by each command (a later run never shows an earlier one's
records); the command prints the count, the first :data:`EXAMPLES` and the file's path.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rag_pipeline.pipeline.retained import TemporaryWrites
from rag_pipeline.settings import Settings
from rag_pipeline.sources.problems import RecordProblem

# Lines on stderr and examples in --json: enough to see the kinds of problems, short enough to read.
EXAMPLES = 10


@dataclass(frozen=True)
class SkippedRecord:
    """One record, file or container a source's read turned away, and why."""

    source: str
    location: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"source": self.source, "location": self.location, "reason": self.reason}

    def line(self) -> str:
        return f"{self.location}: {self.reason}"


@dataclass
class Skipped:
    """The skipped records of one command, each once (runs of one source report the same read's problems),
    in the order they were found. ``count`` can exceed the records listed where only examples were kept
    (a live sync has the first ones of each run's metadata)."""

    records: list[SkippedRecord] = field(default_factory=list)
    unlisted: int = 0
    _seen: set[SkippedRecord] = field(default_factory=set, repr=False)

    @property
    def count(self) -> int:
        return len(self.records) + self.unlisted

    def add(self, source: str, problems: Iterable[RecordProblem]) -> None:
        for problem in problems:
            record = SkippedRecord(source, problem.location, problem.reason)
            if record not in self._seen:
                self._seen.add(record)
                self.records.append(record)

    def write(self, path: Path) -> Path:
        """The full list as JSON lines at ``path``, replaced atomically: two commands on one data folder
        each leave a whole file, never one interleaved with the other's."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                for record in self.records:
                    handle.write(json.dumps(record.as_dict(), ensure_ascii=False) + "\n")
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return path

    def summary(self, report: Path) -> dict[str, Any]:
        """The ``skipped`` object of a command's ``--json``."""
        return {
            "count": self.count,
            "examples": [r.as_dict() for r in self.records[:EXAMPLES]],
            "report": str(report),
            "listed": len(self.records),  # in the report; fewer than count where only examples were kept
        }


def report_path(settings: Settings, command: str) -> Path:
    """Where ``command`` (index, demo, sync) leaves its full list of skipped records."""
    return settings.paths.reports / "skipped" / f"{command}.jsonl"


def print_skipped(summary: dict[str, Any], out: TextIO, *, ran: bool = True) -> None:
    """``skipped N record(s)``, the examples as ``<location>: <reason>`` and where the full list is; nothing
    when nothing was skipped. Plain lines, never wrapped: a log to grep. ``ran``: runs were launched (their
    raw assets' metadata also lists the records)."""
    count = int(summary["count"])
    if not count:
        return
    examples = summary["examples"]
    print(f"skipped {count} record(s):", file=out)
    for example in examples:
        print(f"  {example['location']}: {example['reason']}", file=out)
    if count > len(examples):
        print(f"  ... and {count - len(examples)} more", file=out)
    listed = int(summary.get("listed", count))
    where = "full list" if listed >= count else f"the {listed} listed by the runs' metadata"
    also = " (and the raw assets' bad_records metadata in the Dagster UI)" if ran else ""
    print(f"{where}: {summary['report']}{also}", file=out)


# Retention of the reports' temporary files (:meth:`SkippedRecords.write` killed half-way).
SKIPPED_REPORT_WRITES = TemporaryWrites(lambda settings: settings.paths.reports / "skipped", ".*.tmp")
