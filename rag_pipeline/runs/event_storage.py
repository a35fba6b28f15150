"""A SQLite event log tuned for single-run backfills of many partitions.

Dagster's SQLite event log creates a SQLAlchemy engine for every event and writes the
ASSET_MATERIALIZATION events of a partition range one at a time, into the run's shard and again
into the index shard: about 10 ms per event. This subclass keeps one engine per shard and stores a
batch of materializations (Dagster batches a range's events when ``DAGSTER_EVENT_BATCH_SIZE`` > 0)
in one transaction per shard, as dagster-postgres does.

A range run's materializations all carry their step's metadata (Dagster has no per-partition metadata for a
range), and serializing those same metadata entries again for every partition was 60 % of the time spent
serializing events. Each distinct metadata is serialized once per batch and spliced into the events'
JSON (:func:`serialized_rows`); the splice is checked against Dagster's own serialization of the first
event that carries it, and anything it cannot prove identical is serialized the ordinary way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import dagster as dg
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from rag_pipeline.runs.dagster_private import SQLITE_BUSY_TIMEOUT_SECONDS, SqlEventLogStorageTable
from rag_pipeline.runs.pool_claims import SerializedPoolClaimsStorage


class BatchingSqliteEventLogStorage(SerializedPoolClaimsStorage):
    """``SqliteEventLogStorage`` with cached engines and batched asset materialization writes, whose pool slots
    hold their limit across processes (:mod:`rag_pipeline.runs.pool_claims`)."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self._engines: dict[str, Engine] = {}  # before super(): its __init__ already connects
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> BatchingSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engines.get(shard)
            if engine is None:
                engine = create_engine(
                    self.conn_string_for_shard(shard),
                    poolclass=NullPool,
                    connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
                )
                if shard not in self._initialized_dbs:
                    self._initdb(engine)
                    self._initialized_dbs.add(shard)
                self._engines[shard] = engine
            with engine.connect() as conn, conn.begin():
                yield conn

    def store_event_batch(self, events: Sequence[dg.EventLogEntry]) -> None:
        kinds = {e.dagster_event_type for e in events}
        if kinds != {dg.DagsterEventType.ASSET_MATERIALIZATION} or len({e.run_id for e in events}) != 1:
            return super().store_event_batch(events)
        # Each event is serialized once for both shards, and inserted as executemany rows, whose statement
        # SQLAlchemy compiles once: a multi-row VALUES statement (Dagster's batch insert) is compiled anew for
        # every batch and every shard, ~0.5 ms an event (43 s of the demo's first index).
        rows = serialized_rows(events, self._event_to_row)
        insert = SqlEventLogStorageTable.insert()
        with self.run_connection(events[0].run_id) as conn:
            conn.execute(insert, rows)
        with self.index_transaction() as conn:
            returning = insert.returning(SqlEventLogStorageTable.c.id, sort_by_parameter_order=True)
            ids = [row[0] for row in conn.execute(returning, rows).fetchall()]
            self._store_asset_event_tags(conn, events, ids)
            # The asset row keeps the latest materialization only; earlier ones in the batch are superseded.
            self._store_asset_event(conn, events[-1], ids[-1])

    def dispose(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()
        super().dispose()


# How an empty metadata mapping appears in a serialized AssetMaterialization.
_ENTRIES_KEY = '"metadata_entries": '
_NO_ENTRIES = _ENTRIES_KEY + "[]"


def serialized_rows(
    events: Sequence[dg.EventLogEntry], event_to_row: Callable[[dg.EventLogEntry], dict[str, Any]]
) -> list[dict[str, Any]]:
    """``[event_to_row(event) for event in events]``, with each distinct materialization metadata serialized once.

    Metadata is told apart by the identity of its values: the partitions of one output share the same
    value objects, which the batch keeps alive while it is written, so equal identities mean equal JSON."""
    # Each entry keeps its metadata alive with it, so an id in a key can never be reused within the call.
    entries_by_metadata: dict[tuple[tuple[str, int], ...], tuple[object, str | None]] = {}
    rows = []
    for event in events:
        bare = _without_metadata(event)
        if bare is None:
            rows.append(event_to_row(event))
            continue
        metadata = event.get_dagster_event().step_materialization_data.materialization.metadata
        key = tuple((label, id(value)) for label, value in metadata.items())
        if key not in entries_by_metadata:
            row = event_to_row(event)
            entries_by_metadata[key] = (metadata, _entries_json(row["event"], dg.serialize_value(bare)))
            rows.append(row)
            continue
        # Where the splice cannot be made exactly, the event is serialized the ordinary way.
        rows.append(_spliced_row(bare, entries_by_metadata[key][1], event_to_row) or event_to_row(event))
    return rows


def _spliced_row(
    bare: dg.EventLogEntry, entries: str | None, event_to_row: Callable[[dg.EventLogEntry], dict[str, Any]]
) -> dict[str, Any] | None:
    """The row of ``bare`` (an event without its metadata) with the serialized ``entries`` put back; None where
    there are none to put back or ``bare``'s JSON does not hold exactly one empty list to put them in."""
    if entries is None:
        return None
    row = event_to_row(bare)
    head, found, tail = row["event"].partition(_NO_ENTRIES)
    if not found or _NO_ENTRIES in tail:
        return None
    row["event"] = head + _ENTRIES_KEY + entries + tail
    return row


def _without_metadata(event: dg.EventLogEntry) -> dg.EventLogEntry | None:
    """The same materialization event with no metadata, or None for any other event (or one without metadata)."""
    dagster_event = event.dagster_event
    if dagster_event is None or dagster_event.event_type != dg.DagsterEventType.ASSET_MATERIALIZATION:
        return None
    data = dagster_event.step_materialization_data
    materialization = data.materialization
    if not materialization.metadata:
        return None
    # NamedTuple._replace keeps every other field as it is, whatever fields a Dagster release adds.
    return event._replace(
        dagster_event=dagster_event._replace(
            event_specific_data=data._replace(materialization=materialization._replace(metadata={}))
        )
    )


def _entries_json(full: str, bare: str) -> str | None:
    """The serialized metadata entries: what ``full`` has where ``bare`` (the same event without metadata) has
    ``[]``; None unless ``full`` is exactly ``bare`` with that one list filled in."""
    if bare.count(_NO_ENTRIES) != 1:
        return None
    head, _, tail = bare.partition(_NO_ENTRIES)
    head += _ENTRIES_KEY
    if len(full) < len(head) + len(tail) or not (full.startswith(head) and full.endswith(tail)):
        return None
    entries = full[len(head) : len(full) - len(tail)]
    return entries if entries.startswith("[") and entries.endswith("]") else None
