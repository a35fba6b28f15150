"""One JSON line per event in a file per UTC day (``<folder>/<prefix>YYYY-MM-DD.jsonl``), files older than the
retention deleted when the day changes, so nothing outlives the policy: what the request audit and readers'
feedback both keep."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


def utc_day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d")


def iso_z(seconds: float, timespec: str = "seconds") -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


class DailyJsonLines:
    """Appends lines to the day's file in ``folder``; keeps ``retention_days`` days of files (at least 1;
    ``setting`` names what sets it, for the error)."""

    def __init__(
        self, folder: Path, prefix: str, retention_days: int, setting: str, clock: Callable[[], float] = time.time
    ) -> None:
        if retention_days < 1:
            raise ValueError(f"{setting} at least 1 day (0 turns it off)")
        self.folder = Path(folder)
        self.prefix = prefix
        self.retention_days = retention_days
        self.clock = clock
        self._lock = threading.Lock()
        self._pruned_day: str | None = None

    def path_for(self, day: str) -> Path:
        return self.folder / f"{self.prefix}{day}.jsonl"

    def append(self, entry: dict[str, Any], now: float) -> None:
        """Write ``entry`` as the line of ``now``'s day (an OSError is the caller's to handle)."""
        line = json.dumps(entry, ensure_ascii=False)
        day = utc_day(now)
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            if day != self._pruned_day:
                self._prune(now)
                self._pruned_day = day
            with self.path_for(day).open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")

    def _prune(self, now: float) -> None:
        oldest = utc_day(now - timedelta(days=self.retention_days - 1).total_seconds())
        for path in self.folder.glob(f"{self.prefix}*.jsonl"):
            if path.stem[len(self.prefix) :] < oldest:
                path.unlink(missing_ok=True)


def read_daily_lines(folder: Path, prefix: str) -> Iterator[dict[str, Any]]:
    """Every stored line, oldest day first (a line that does not parse is skipped: a crash mid-write)."""
    for path in sorted(Path(folder).glob(f"{prefix}*.jsonl")):
        for line in path.read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict):
                yield entry
