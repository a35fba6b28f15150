"""What happened when agents called tools: calls and successes per tool name, which tool search's usage and
success signals read. Kept in SQLite in the data folder (``tool_outcomes.sqlite``), written by
``POST /v1/tools/{name}/outcome`` and the MCP ``record_tool_outcome`` tool; no query text is stored."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path


@dataclass(frozen=True)
class ToolStats:
    """One tool's record: how often it was called and how often that worked."""

    calls: int = 0
    successes: int = 0


class ToolOutcomes:
    """Calls and successes per tool name; ``path=None`` keeps them in memory (the evaluation's simulation)."""

    def __init__(self, path: Path | None = None) -> None:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False, timeout=30)
        with self._lock, self._conn:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS tool_outcomes (tool TEXT PRIMARY KEY, calls INTEGER NOT NULL, "
                "successes INTEGER NOT NULL, last_called TEXT NOT NULL)"
            )
        self.version = 0  # raised on every record: what a cached score must be recomputed after

    def record(self, tool: str, success: bool, calls: int = 1) -> ToolStats:
        """Count ``calls`` calls of ``tool`` (all successes or all failures); the tool's record after it."""
        if calls < 1:
            raise ValueError(f"calls must be at least 1, got {calls}")
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT INTO tool_outcomes (tool, calls, successes, last_called) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(tool) DO UPDATE SET calls = calls + excluded.calls, "
                "successes = successes + excluded.successes, last_called = excluded.last_called",
                (tool, calls, calls if success else 0, now),
            )
            row = self._conn.execute("SELECT calls, successes FROM tool_outcomes WHERE tool = ?", (tool,)).fetchone()
            self.version += 1
        return ToolStats(int(row[0]), int(row[1]))

    def stats(self) -> dict[str, ToolStats]:
        with self._lock:
            rows = self._conn.execute("SELECT tool, calls, successes FROM tool_outcomes").fetchall()
        return {str(tool): ToolStats(int(calls), int(successes)) for tool, calls, successes in rows}

    def load(self, stats: Mapping[str, ToolStats]) -> None:
        """Replace every record (the evaluation's usage simulated from a training split)."""
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM tool_outcomes")
            self._conn.executemany(
                "INSERT INTO tool_outcomes VALUES (?, ?, ?, ?)",
                [(tool, s.calls, s.successes, now) for tool, s in stats.items()],
            )
            self.version += 1

    def close(self) -> None:
        with self._lock:
            self._conn.close()
