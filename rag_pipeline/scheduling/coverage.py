"""Which (container, day) cells one run reads and rewrites.

The chain is partitioned by week only (docs/decisions/partitions-and-backfills.md): one partition holds every
channel's or project's documents of that week. A run rewrites part of a week when it syncs only some
containers, or some days of them (a scheduled tick reads each container from its own watermark; a re-sync
reads one channel). Its coverage says which cells it owns: every stored row of a covered cell is replaced by
what the run read (nothing, where the cell is now empty), and rows of other cells are kept untouched and not
processed again downstream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta

import pandas as pd

# Bookkeeping columns of every stored frame of the chain: which cell a row belongs to.
DAY_COLUMN = "_day"
CONTAINER_COLUMN = "_container"


@dataclass(frozen=True)
class Coverage:
    """Per container, the first and last day (ISO) a run reads; ``None``: every container, every day of the
    run's partitions (a whole-source backfill)."""

    ranges: Mapping[str, tuple[str, str]] | None

    @classmethod
    def everything(cls) -> Coverage:
        return cls(None)

    @property
    def whole(self) -> bool:
        return self.ranges is None

    @property
    def containers(self) -> list[str]:
        return sorted(self.ranges or {})

    def covers(self, container: str, day: str) -> bool:
        if self.ranges is None:
            return True
        found = self.ranges.get(container)
        return found is not None and found[0] <= day <= found[1]

    def mask(self, frame: pd.DataFrame) -> pd.Series:
        """Which rows of ``frame`` (with the bookkeeping columns) lie in covered cells."""
        if self.ranges is None:
            return pd.Series(True, index=frame.index)
        if not len(frame):
            return pd.Series(False, index=frame.index, dtype=bool)
        containers = frame[CONTAINER_COLUMN].astype(str)
        days = frame[DAY_COLUMN].astype(str)
        # Vectorized per container: a tick covers hundreds of containers, a week holds thousands of rows.
        first = containers.map({c: r[0] for c, r in self.ranges.items()})
        last = containers.map({c: r[1] for c, r in self.ranges.items()})
        return (first.notna() & (days >= first.fillna("")) & (days <= last.fillna(""))).astype(bool)

    def days_by_container(self, days: Iterable[str], every_container: Iterable[str]) -> dict[str, list[str]]:
        """The days each container is read on, among ``days`` (the run's days); ``every_container`` is used
        when the coverage is whole."""
        days = sorted(days)
        if self.ranges is None:
            return {c: list(days) for c in sorted(set(every_container))}
        out = {}
        for container, (first, last) in sorted(self.ranges.items()):
            mine = [d for d in days if first <= d <= last]
            if mine:
                out[container] = mine
        return out


def week_start(day: date) -> date:
    """The Monday of ``day``'s ISO week (a weekly partition's key)."""
    return day - timedelta(days=day.weekday())


def days_of_week(key: str, first: date | None = None, last: date | None = None) -> list[str]:
    """The seven days of the week starting ``key`` (a Monday), clipped to ``first``..``last``."""
    start = date.fromisoformat(key)
    days = (start + timedelta(days=i) for i in range(7))
    return [d.isoformat() for d in days if (first is None or d >= first) and (last is None or d <= last)]


def weeks_between(first: date, last: date) -> list[str]:
    """The keys of the weeks from ``first``'s through ``last``'s."""
    out, week = [], week_start(first)
    while week <= last:
        out.append(week.isoformat())
        week += timedelta(days=7)
    return out
