"""Where each source's weekly partitions start: at its first data week, so the Dagster UI shows no *Missing* week
before a source's first document (issue 68: the demo's ``jira_issues`` showed 380 of them from 2004-01-01).

A Dagster partitions definition is fixed when the code location loads, so the start is read then, from the data
folder: the record ``partition_starts.json`` beside ``layout.json`` holds each source's first data week. Loading
brings the record up to date from the week files the chain wrote (``parquet/<source>_child_chunks/<week>.parquet``,
one file per week that held documents): a source's start is set at its first index and moves **earlier only**, when
older data arrives (a new export, a ``sync --start`` further back); retention deleting old week files never moves it
later, so weeks once shown never vanish. A data folder indexed before the record existed gets it the same way on
its first load (the migration), and every move is kept in the record's history. A sync sensor records the first
week of each run it plans before requesting it (:func:`record_planned_start`): the run's steps load the code
location again and must find its range inside the partitions.

What does not move: partition keys are Mondays whatever the start, so the materializations, watermarks and run
tags of the weeks already there keep their keys when the start moves. The in-process runners (``index``, ``demo``,
``sync``) keep building their partitions from ``RAG_PARTITION_START`` (default 2004-01-01), the earliest day a
document is admitted, so a run can cover older data before any record says so; the webserver and daemon show the
new start from their next code-location load (the UI's *Reload*, or a restart). An explicit ``RAG_PARTITION_START``
wins over the record for every source.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from rag_pipeline.pipeline.keys import ChainKeys, week_key

PARTITION_START_RECORD = "partition_starts.json"


@dataclass(frozen=True)
class PartitionStarts:
    """Each source's first data week (a Monday, ``YYYY-MM-DD``), and the history of the moves."""

    weeks: dict[str, str]
    history: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"version": 1, "first_weeks": dict(sorted(self.weeks.items())), "history": self.history}


def _week_or_none(stem: str) -> str | None:
    try:
        day = date.fromisoformat(stem)
    except ValueError:
        return None
    return stem if week_key(day) == stem else None


def first_data_week(parquet: Path, source: str) -> str | None:
    """The first week the chain of ``source`` wrote documents for (its week files), None before its first index."""
    folder = parquet / ChainKeys(source, source).children
    if not folder.is_dir():
        return None
    weeks = [w for f in folder.glob("*.parquet") if (w := _week_or_none(f.stem))]
    return min(weeks) if weeks else None


def read_partition_starts(data_dir: Path) -> PartitionStarts:
    """The record in ``data_dir`` (empty when there is none); a record that cannot be read is an error that says
    what to do, as for ``layout.json``."""
    record = data_dir / PARTITION_START_RECORD
    if not record.is_file():
        return PartitionStarts({}, [])
    try:
        written = json.loads(record.read_text(encoding="utf-8"))
        weeks = {str(k): str(v) for k, v in dict(written["first_weeks"]).items()}
        if any(_week_or_none(w) is None for w in weeks.values()):
            raise ValueError("a first week is not a Monday (YYYY-MM-DD)")
        return PartitionStarts(weeks, list(written.get("history", [])))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{record} is not a partition start record ({type(exc).__name__}: {exc}): delete it to have it made again "
            "from the folder's week files"
        ) from None


def update_partition_starts(
    data_dir: Path, parquet: Path, sources: Iterable[str], now: datetime | None = None
) -> PartitionStarts:
    """The record brought up to date from the week files of ``sources``: a source without a start gets its first data
    week, one whose files now begin earlier moves there; nothing moves later. Written back only when something
    moved (atomically); a data folder this process may not write (a read-only mount) still gets the new starts, in
    memory, for this load."""
    starts = read_partition_starts(data_dir)
    weeks, history = dict(starts.weeks), list(starts.history)
    at = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    for source in sources:
        found = first_data_week(parquet, source)
        recorded = weeks.get(source)
        if found is None or (recorded is not None and found >= recorded):
            continue
        weeks[source] = found
        why = "first data week" if recorded is None else "older data arrived"
        history.append({"source": source, "from": recorded, "to": found, "at": at, "why": why})
    updated = PartitionStarts(weeks, history)
    if weeks != starts.weeks:
        _write(data_dir, updated)
    return updated


def record_planned_start(data_dir: Path, source: str, first_day: date, now: datetime | None = None) -> None:
    """A run is about to be launched for ``source`` over weeks from ``first_day``'s: the record's start moves to that
    week when it is unset or later, before the run exists.

    Why: a run's steps load the code location afresh (a run worker, a Celery worker), and each load brings the
    record up to date from the week files. A new source's first sync is planned where nothing is recorded (every
    admitted week open), say 90 days of initial history; its first step writes the first week that held data, and
    without this the later steps would load a start *after* the run's own range and Dagster would refuse the run
    ("partition key range start … is before the partitions definition start"; found by the stack test). Weeks
    between the planned start and the first data week are materialized (empty) by that run, so none shows Missing."""
    starts = read_partition_starts(data_dir)
    week = week_key(first_day)
    recorded = starts.weeks.get(source)
    if recorded is not None and recorded <= week:
        return
    at = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    move = {"source": source, "from": recorded, "to": week, "at": at, "why": "a run was planned from this week"}
    _write(data_dir, PartitionStarts({**starts.weeks, source: week}, [*starts.history, move]))


def _write(data_dir: Path, starts: PartitionStarts) -> None:
    """The record written atomically; a data folder this process may not write (a read-only mount) keeps the old one
    (the next writer's load records it)."""
    record = data_dir / PARTITION_START_RECORD
    try:
        data_dir.mkdir(parents=True, exist_ok=True)  # a sensor may plan a first run before anything was written
        temporary = record.with_suffix(".tmp")
        temporary.write_text(json.dumps(starts.as_dict(), indent=2) + "\n", encoding="utf-8")
        temporary.replace(record)
    except OSError:
        pass


def partition_start_of(source: str, starts: Mapping[str, str], configured: str, explicit: bool) -> str:
    """The first day of ``source``'s partitions: ``configured`` (RAG_PARTITION_START) where the operator set it,
    else its recorded first data week, else ``configured`` (the default: nothing indexed yet, every week open)."""
    if explicit:
        return configured
    return starts.get(source, configured)
