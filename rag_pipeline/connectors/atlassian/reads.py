"""What an Atlassian read covers and what it finds: the UTC days it reads as a query window in the API user's time
zone, each item's newest version and its day, a container as the site's listing shows it, and the read's result.

JQL and CQL dates have minute precision and are read in the API user's time zone, so a window is written as that
zone's wall clock (widened by 14 hours each side where the zone is unknown) and the instants returned are still
filtered exactly: a boundary item lands in exactly one day whatever the user's zone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Generic, TypeVar
from zoneinfo import ZoneInfo

from rag_pipeline.sources.days import day_of, day_start
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import RecordProblem

# Every real zone is within UTC-12..UTC+14: a window this much wider holds the day in any zone.
ZONE_PAD = timedelta(hours=14)
# The longest repeated wall-clock span of a DST change (one hour everywhere but Troll's two).
DST_PAD = timedelta(hours=2)

Item = TypeVar("Item")


@dataclass(frozen=True)
class ListedContainer:
    """A container (a project, a space) as the site's listing shows it."""

    key: str
    id: str
    name: str
    archived: bool = False


@dataclass
class ContainerRead:
    """What a read of one container (a project, a space) for a set of days found: its documents, the day each
    belongs to, what could not be read, and how many comment pages it took."""

    documents: list[Document] = field(default_factory=list)
    partition_day: dict[str, str] = field(default_factory=dict)
    problems: list[RecordProblem] = field(default_factory=list)
    comment_pages: int = 0

    def place(self, document: Document, day: str) -> None:
        """Add ``document`` to the read, belonging to partition ``day``."""
        self.documents.append(document)
        self.partition_day[document.id] = day


def _wall_clock(instant: datetime, zone: ZoneInfo | None, widen: timedelta, fmt: str) -> str:
    """``instant`` as the user's wall clock; a wall clock that occurs twice (clocks going back) is moved by
    ``widen`` so either reading the server picks still covers the instant."""
    clock = zone or UTC
    wall = instant.astimezone(clock).replace(tzinfo=None)
    if len({wall.replace(tzinfo=clock, fold=fold).utcoffset() for fold in (0, 1)}) > 1:
        wall += widen
    return wall.strftime(fmt)


def query_bounds(start: datetime, end: datetime, zone: ZoneInfo | None, fmt: str) -> tuple[str, str]:
    """[start, end) as a query's wall-clock bounds in ``zone`` (``fmt``: minutes at most): the start floored and
    the end ceiled to whole minutes, both widened by 14 hours when the zone is unknown (None); the caller filters
    the instants it gets exactly."""
    if zone is None:
        start, end = start - ZONE_PAD, end + ZONE_PAD
    end_ceiled = end + timedelta(minutes=1) if end.second or end.microsecond else end
    return _wall_clock(start, zone, -DST_PAD, fmt), _wall_clock(end_ceiled, zone, DST_PAD, fmt)


@dataclass(frozen=True)
class DayWindow:
    """The UTC days (YYYY-MM-DD, sorted) a read covers and the instants it asks for: from ``overlap_minutes``
    before the first day (search is eventually consistent; a change found there goes to the first day) to the
    end of the last."""

    days: tuple[str, ...]
    start: datetime
    end: datetime

    @classmethod
    def covering(cls, days: Iterable[str], overlap_minutes: int) -> DayWindow | None:
        """The window of ``days`` (None when there are none)."""
        wanted = tuple(sorted(set(days)))
        if not wanted:
            return None
        first = datetime.fromtimestamp(day_start(wanted[0]), tz=UTC)
        end = datetime.fromtimestamp(day_start(wanted[-1]), tz=UTC) + timedelta(days=1)
        return cls(wanted, first - timedelta(minutes=overlap_minutes), end)

    def holds(self, instant: datetime) -> bool:
        return self.start <= instant < self.end

    def partition_day(self, instant: datetime) -> str | None:
        """The day a change at ``instant`` belongs to: its own day when read, the first day for the overlap before
        it, None for a day between the ones read."""
        day = day_of(instant.timestamp())
        if day in self._day_set:
            return day
        return self.days[0] if day < self.days[0] else None

    @cached_property
    def _day_set(self) -> frozenset[str]:
        return frozenset(self.days)


class NewestVersions(Generic[Item]):
    """The newest version of each item a window's read found (pages ordered by modification can repeat an item
    changed while paging; ties keep the later one), and the day each belongs to."""

    def __init__(self, window: DayWindow) -> None:
        self.window = window
        self._latest: dict[str, tuple[datetime, Item]] = {}

    def offer(self, item_id: str, updated: datetime, item: Item) -> None:
        """Keep ``item`` when it changed inside the window and is not older than the version kept."""
        if not self.window.holds(updated):
            return
        previous = self._latest.get(item_id)
        if previous is None or previous[0] <= updated:
            self._latest[item_id] = (updated, item)

    def by_day(self) -> Iterator[tuple[str, Item]]:
        """(day, item) of every item kept that belongs to a day read."""
        for updated, item in self._latest.values():
            day = self.window.partition_day(updated)
            if day is not None:
                yield day, item
