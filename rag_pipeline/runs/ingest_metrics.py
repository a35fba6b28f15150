"""Ingestion figures for Prometheus, computed from the Dagster instance and the data folder on each scrape.

``rag-pipeline metrics`` (``commands/metrics.py``) serves one :class:`IngestMetrics` collector over HTTP. The
collector reads what the sync sensors, the runners and the search service already record, and adds nothing to
the pipeline:

- per live source and channel/project, the watermarks, lag, last failures and runs in flight, through
  :func:`~rag_pipeline.runs.sync_status.source_status` (the same reading as ``rag-pipeline status`` and the
  sync sensors), with the bound of the ``containers_within_lag`` asset check;
- the sync and index runs of the last window (24 h) by source and status, from the instance's run records, and
  the containers the latest sync run could not read;
- documents written and records turned away by the runs of the window, from their materializations' metadata,
  and the index's size after its latest write;
- the skipped-records reports the commands leave under ``<data>/reports/skipped``;
- when the index was last written (its own record, ``index_info.written_at``), read without opening the
  embedded store, whose folder admits one opener at a time (docs/notes/embedded_store_concurrency.md).

A computation costs a few queries per source (one run-record page, a few materialization reads), so its result
is kept for ``cache_seconds``: two Prometheus servers, a dashboard refresh and a curl share one. A part that fails
(the instance's database away, a report unreadable) leaves its figures out and sets
``rag_ingest_collect_ok{part}`` to 0; the others are still served. Labels stay few: the registered sources, the
run statuses, the report files' commands, and per-container series only for the containers that are behind or
failing, at most ``max_containers`` per source. Nothing the collector exports holds a secret, a message text or
an error message: only names of sources, container ids, counts and times. Design notes and the metric table:
docs/notes/ingest_metrics.md.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rag_pipeline.composition import store_location
from rag_pipeline.index.index_info import WRITTEN_AT_KEY, written_at
from rag_pipeline.index.opening import StoreLocation, open_vector_store
from rag_pipeline.index.store import VectorStore
from rag_pipeline.pipeline.policy import sync_policy
from rag_pipeline.pipeline.sources import SourceNames
from rag_pipeline.pipeline.tags import FAILED_CONTAINERS_TAG, SOURCE_TAG
from rag_pipeline.runs.code_location import source_specs
from rag_pipeline.runs.skipped import report_path
from rag_pipeline.runs.sync_runs import cron_window, sync_runs
from rag_pipeline.runs.sync_status import ContainerStatus, source_status
from rag_pipeline.scheduling.plan import SyncPolicy
from rag_pipeline.scheduling.watermarks import RunState
from rag_pipeline.settings import Settings

log = logging.getLogger(__name__)

# Defaults of `rag-pipeline metrics` (its options change them).
DEFAULT_CACHE_SECONDS = 10.0
DEFAULT_WINDOW = timedelta(hours=24)
DEFAULT_MAX_CONTAINERS = 20
# Run records and materializations read per source and window: far above a day of hourly syncs (one record per
# run, one materialization per week a run covers), low enough that a runaway backfill cannot make a scrape slow.
# A window that holds more is counted up to this many and says so (rag_ingest_window_truncated).
MAX_RECORDS = 2000
_PAGE = 500

# Every family the collector can export: name -> (type, HELP, label names). One table, so the HELP strings, the
# documentation (docs/notes/ingest_metrics.md) and the tests that check the dashboard agree.
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "rag_ingest_source_info": (
        "gauge",
        "A live source whose sync is reported (1), with its switch (RAG_<SOURCE>_SYNC_ENABLED) as label enabled",
        ("source", "enabled"),
    ),
    "rag_ingest_paused": (
        "gauge",
        "1 while scheduled ingestion is paused (rag-pipeline pause, RAG_INGESTION_PAUSED), else 0",
        (),
    ),
    "rag_ingest_containers": ("gauge", "Channels/projects known to the source's sync (discovered)", ("source",)),
    "rag_ingest_containers_behind": (
        "gauge",
        "Channels/projects whose watermark is older than the lag bound, or never synced: what the "
        "containers_within_lag asset check counts",
        ("source",),
    ),
    "rag_ingest_containers_failing": (
        "gauge",
        "Channels/projects whose last sync run failed for them (newer than their last success)",
        ("source",),
    ),
    "rag_ingest_containers_in_flight": (
        "gauge",
        "Channels/projects a queued or running sync run covers",
        ("source",),
    ),
    "rag_ingest_latest_run_failed_containers": (
        "gauge",
        "Channels/projects the source's latest finished sync run could not sync (all of them for a failed run)",
        ("source",),
    ),
    "rag_ingest_latest_run_end_timestamp_seconds": (
        "gauge",
        "Unix time the source's latest finished sync run ended",
        ("source",),
    ),
    "rag_ingest_lag_bound_seconds": (
        "gauge",
        "The lag bound of the containers_within_lag check: two intervals of the source's sync cron plus the "
        "settle window (RAG_SYNC_SETTLE_HOURS)",
        ("source",),
    ),
    "rag_ingest_lag_seconds": (
        "gauge",
        "Seconds since the oldest watermark of the source's synced channels/projects (now - watermark, max over "
        "containers; never-synced ones are in rag_ingest_containers_behind)",
        ("source",),
    ),
    "rag_ingest_last_success_timestamp_seconds": (
        "gauge",
        "Unix time of the newest watermark of the source: the instant its latest successful sync made good",
        ("source",),
    ),
    "rag_ingest_document_lag_max_seconds": (
        "gauge",
        "Longest wait of a changed document between its source timestamp and its read, over the containers' "
        "last successful sync runs (sync_lag_max_seconds metadata)",
        ("source",),
    ),
    "rag_ingest_container_last_success_timestamp_seconds": (
        "gauge",
        "Unix time of a channel/project's watermark (0: never synced); only containers behind or failing, at most "
        "--max-containers per source, worst first",
        ("source", "container"),
    ),
    "rag_ingest_container_lag_seconds": (
        "gauge",
        "Seconds since a channel/project's watermark; only synced containers behind or failing, at most "
        "--max-containers per source",
        ("source", "container"),
    ),
    "rag_ingest_container_failing": (
        "gauge",
        "1 when a channel/project's last sync run failed for it; only containers behind or failing, at most "
        "--max-containers per source",
        ("source", "container"),
    ),
    "rag_ingest_container_series_omitted": (
        "gauge",
        "Channels/projects behind or failing that were left out of the per-container series (--max-containers)",
        ("source",),
    ),
    "rag_ingest_runs": (
        "gauge",
        "Runs created in the window (rag_ingest_window_seconds) by source, kind (sync: the live API; index: the "
        "offline files) and status (success, partial: succeeded with channels/projects it could not read, "
        "failure, canceled, in_progress)",
        ("source", "kind", "status"),
    ),
    "rag_ingest_documents_written": (
        "gauge",
        "Documents written to the index by the source's runs that ended in the window (documents_written of "
        "each run's points step)",
        ("source",),
    ),
    "rag_ingest_documents_read": (
        "gauge",
        "Documents the source's runs read in the window (documents of each run's raw step)",
        ("source",),
    ),
    "rag_ingest_bad_records": (
        "gauge",
        "Source records the source's runs turned away in the window (bad_records of each run's raw step)",
        ("source",),
    ),
    "rag_ingest_window_seconds": ("gauge", "The window the run, document and record counts cover", ()),
    "rag_ingest_window_truncated": (
        "gauge",
        "1 when the window held more run records or materializations than one scrape reads (the counts are then "
        "lower bounds)",
        ("source",),
    ),
    "rag_ingest_index_points": (
        "gauge",
        "Points in the index's collections (children: searched chunks; parents: their text) after its latest write "
        "by a points step",
        ("collection",),
    ),
    "rag_ingest_index_written_timestamp_seconds": (
        "gauge",
        "Unix time the pipeline last wrote to the index (the index's own written_at record)",
        (),
    ),
    "rag_ingest_skipped_records": (
        "gauge",
        "Records listed in the skipped-records report of a command (index, demo, sync) by source; each run of the "
        "command replaces its report",
        ("command", "source"),
    ),
    "rag_ingest_skipped_report_timestamp_seconds": (
        "gauge",
        "Unix time a command's skipped-records report was last written",
        ("command",),
    ),
    "rag_ingest_collect_ok": (
        "gauge",
        "1 when the part (sync, runs, index, reports) was read on the last computation, 0 when it failed (logged)",
        ("part",),
    ),
    "rag_ingest_scrape_duration_seconds": (
        "gauge",
        "Seconds the exporter's last computation of these figures took",
        (),
    ),
    "rag_ingest_collected_timestamp_seconds": (
        "gauge",
        "Unix time the figures served were computed (cached for --cache-seconds)",
        (),
    ),
}

PARTS = ("sync", "runs", "index", "reports")
RUN_STATUSES = ("success", "partial", "failure", "canceled", "in_progress")
_FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
_REPORT_NAME = re.compile(r"[a-z][a-z0-9_]*")


def lag_bound(cron: str, policy: SyncPolicy, now: datetime) -> timedelta:
    """How old a watermark may be before the ``containers_within_lag`` check names its container: two
    intervals of the cron plus the settle window (``build_lag_check`` in defs/sync/sensor.py)."""
    latest, upcoming = cron_window(cron, now)
    return 2 * (upcoming - latest) + policy.settle


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ExporterOptions:
    """How much the collector reads and how long it keeps a computation."""

    cache_seconds: float = DEFAULT_CACHE_SECONDS
    window: timedelta = DEFAULT_WINDOW
    max_containers: int = DEFAULT_MAX_CONTAINERS


class _Families:
    """The families of one computation, created on first use from :data:`METRICS`."""

    def __init__(self) -> None:
        self._families: dict[str, GaugeMetricFamily] = {}

    def add(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        kind, documentation, label_names = METRICS[name]
        assert kind == "gauge", name
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = GaugeMetricFamily(name, documentation, labels=list(label_names))
        given = labels or {}
        assert set(given) == set(label_names), (name, given)
        family.add_metric([given[label] for label in label_names], float(value))

    def merge(self, other: _Families) -> None:
        """Take ``other``'s families (a part's, once it was read whole)."""
        self._families.update(other._families)

    def all(self) -> list[Metric]:
        return list(self._families.values())


class IngestMetrics(Collector):
    """The ``rag_ingest_*`` families (:data:`METRICS`) of one Dagster instance and data folder.

    ``instance`` stays open for the collector's life (the caller's); ``clock`` is the instant the figures are
    computed for (tests move it). Thread-safe: concurrent scrapes wait for one computation and share it."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        settings: Settings,
        options: ExporterOptions | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.instance = instance
        self.settings = settings
        self.options = options or ExporterOptions()
        self.clock = clock
        self.specs: dict[str, SourceNames] = dict(source_specs(settings))
        self._location: StoreLocation = store_location(settings)
        self._server_store: VectorStore | None = None
        self._lock = threading.Lock()
        self._cached: list[Metric] = []
        self._cached_at: float | None = None  # time.monotonic() of the computation served
        # Report file -> ((mtime_ns, size), counts by source): a report is read again only when it changes.
        self._reports: dict[Path, tuple[tuple[int, int], dict[str, int]]] = {}

    # --- the Collector interface -----------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        with self._lock:
            fresh = self._cached_at is not None and time.monotonic() - self._cached_at < self.options.cache_seconds
            if not fresh:
                self._cached = self.compute()
                self._cached_at = time.monotonic()
            families = list(self._cached)
        yield from families

    def describe(self) -> Iterator[Metric]:
        # Registering must not compute (it would query the instance before the server even listens).
        return iter(())

    def close(self) -> None:
        """Close the Qdrant server connection, if one was made (the instance is the caller's)."""
        if self._server_store is not None:
            self._server_store.close()
            self._server_store = None

    # --- one computation -----------------------------------------------------------------------------------
    def compute(self) -> list[Metric]:
        """Every family, read now (no cache)."""
        started = time.perf_counter()
        now = self.clock()
        out = _Families()
        # The pause is a file in the data folder (an unreadable one counts as paused): it never fails.
        out.add("rag_ingest_paused", 1 if self.settings.ingestion_pause() is not None else 0)
        for part, read in (
            ("sync", self._sync),
            ("runs", self._runs),
            ("index", self._index),
            ("reports", self._reports_part),
        ):
            part_families = _Families()
            try:
                read(part_families, now)
            except Exception as exc:  # one part's failure must not hide the others' figures
                # The exception's type and first line only: a database error can quote a connection string.
                first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
                log.warning("ingest metrics: reading the %s figures failed: %s: %s", part, type(exc).__name__, first)
                out.add("rag_ingest_collect_ok", 0, {"part": part})
                continue
            out.add("rag_ingest_collect_ok", 1, {"part": part})
            out.merge(part_families)
        out.add("rag_ingest_scrape_duration_seconds", time.perf_counter() - started)
        out.add("rag_ingest_collected_timestamp_seconds", now.timestamp())
        return out.all()

    def _synced_sources(self) -> list[SourceNames]:
        """Sources with a live sync here: configured (a token set) or with channels/projects the discovery
        registered. The latter lets the exporter run without the sources' secrets (deploy/compose.yaml gives it
        none) and still report a daemon's syncs."""
        live = set(self.settings.live_sources)
        return [
            spec
            for name, spec in self.specs.items()
            if name in live or self.instance.get_dynamic_partitions(spec.containers_name)
        ]

    def _sync(self, out: _Families, now: datetime) -> None:
        for spec in self._synced_sources():
            sync = self.settings.automation.sync(spec.name)
            policy = sync_policy(self.settings, spec.name)
            status = source_status(self.instance, spec, sync.cron, policy, sync.enabled, now)
            bound = lag_bound(sync.cron, policy, now).total_seconds()
            source = {"source": spec.name}
            out.add("rag_ingest_source_info", 1, {**source, "enabled": "true" if sync.enabled else "false"})
            out.add("rag_ingest_lag_bound_seconds", bound, source)
            self._containers(out, spec.name, status.containers, bound)
            self._latest_run(out, spec)

    def _containers(self, out: _Families, source: str, containers: list[ContainerStatus], bound: float) -> None:
        labels = {"source": source}
        behind = [c for c in containers if c.behind_seconds is None or c.behind_seconds > bound]
        failing = [c for c in containers if c.last_failure is not None]
        synced = [c for c in containers if c.watermark is not None]
        out.add("rag_ingest_containers", len(containers), labels)
        out.add("rag_ingest_containers_behind", len(behind), labels)
        out.add("rag_ingest_containers_failing", len(failing), labels)
        out.add("rag_ingest_containers_in_flight", sum(1 for c in containers if c.in_flight), labels)
        if synced:
            out.add("rag_ingest_lag_seconds", max(c.behind_seconds or 0.0 for c in synced), labels)
            out.add("rag_ingest_last_success_timestamp_seconds", max(_epoch(c.watermark) for c in synced), labels)
        lags = [c.sync_lag_max_seconds for c in containers if c.sync_lag_max_seconds is not None]
        if lags:
            out.add("rag_ingest_document_lag_max_seconds", max(lags), labels)
        # Per-container series only where someone has to look, worst first: never synced, then the oldest
        # watermark. A healthy source exports none, so the series count does not grow with the workspace.
        names = {c.container for c in behind} | {c.container for c in failing}
        wanted = sorted(
            (c for c in containers if c.container in names),
            key=lambda c: (c.watermark is not None, -(c.behind_seconds or 0.0), c.container),
        )
        shown = wanted[: max(0, self.options.max_containers)]
        for c in shown:
            mine = {"source": source, "container": c.container}
            out.add(
                "rag_ingest_container_last_success_timestamp_seconds", _epoch(c.watermark) if c.watermark else 0, mine
            )
            if c.behind_seconds is not None:
                out.add("rag_ingest_container_lag_seconds", c.behind_seconds, mine)
            out.add("rag_ingest_container_failing", 1 if c.last_failure is not None else 0, mine)
        out.add("rag_ingest_container_series_omitted", len(wanted) - len(shown), labels)

    def _latest_run(self, out: _Families, spec: SourceNames) -> None:
        """What the latest finished sync run left undone: its containers' parts read as the planner reads them."""
        records = self.instance.get_run_records(
            dg.RunsFilter(tags={SOURCE_TAG: spec.api_tag}, statuses=_FINISHED), limit=1
        )
        if not records:
            return
        record = records[0]
        parts = sync_runs(spec, record)
        failed = sum(1 for part in parts if part.state is RunState.FAILURE)
        labels = {"source": spec.name}
        out.add("rag_ingest_latest_run_failed_containers", failed, labels)
        if record.end_time:
            out.add("rag_ingest_latest_run_end_timestamp_seconds", record.end_time, labels)

    def _runs(self, out: _Families, now: datetime) -> None:
        since = now - self.options.window
        out.add("rag_ingest_window_seconds", self.options.window.total_seconds())
        for spec in self.specs.values():
            labels = {"source": spec.name}
            truncated = False
            # Sync runs carry the live API's tag, the offline index runs (backfill.py) the source's name.
            for kind, tag in (("sync", spec.api_tag), ("index", spec.name)):
                counts = dict.fromkeys(RUN_STATUSES, 0)
                records = self.instance.get_run_records(
                    dg.RunsFilter(tags={SOURCE_TAG: tag}, created_after=since), limit=MAX_RECORDS
                )
                truncated |= len(records) >= MAX_RECORDS
                for record in records:
                    counts[_run_status(record.dagster_run)] += 1
                for status, count in counts.items():
                    out.add("rag_ingest_runs", count, {**labels, "kind": kind, "status": status})
            written, more = self._metadata_sum(spec.keys.points, since, ("documents_written",))
            read, more_raw = self._metadata_sum(spec.keys.raw, since, ("documents", "bad_records"))
            out.add("rag_ingest_documents_written", written["documents_written"], labels)
            out.add("rag_ingest_documents_read", read["documents"], labels)
            out.add("rag_ingest_bad_records", read["bad_records"], labels)
            out.add("rag_ingest_window_truncated", 1 if truncated or more or more_raw else 0, labels)

    def _metadata_sum(self, asset: str, since: datetime, keys: Iterable[str]) -> tuple[dict[str, float], bool]:
        """The sum of ``keys`` of the asset's materializations since ``since``, once per run: a range run records
        one materialization per week it covers, each with the whole run's metadata. Also whether more
        materializations were there than :data:`MAX_RECORDS`."""
        totals = dict.fromkeys(keys, 0.0)
        seen: set[str] = set()
        cursor: str | None = None
        read = 0
        while True:
            page = self.instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), after_timestamp=since.timestamp()),
                limit=_PAGE,
                cursor=cursor,
            )
            for record in page.records:
                if record.run_id in seen:
                    continue
                seen.add(record.run_id)
                materialization = record.asset_materialization
                metadata = materialization.metadata if materialization is not None else {}
                for key in totals:
                    value = getattr(metadata.get(key), "value", None)
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        totals[key] += value
            read += len(page.records)
            if not page.has_more:
                return totals, False
            if read >= MAX_RECORDS:
                return totals, True
            cursor = page.cursor

    def _index(self, out: _Families, now: datetime) -> None:
        written = self._written_at()
        if written is not None:
            out.add("rag_ingest_index_written_timestamp_seconds", written)
        # The collections' sizes from the newest points step of any source (they share the collections): read
        # from its metadata rather than counted, which would open the embedded store or count a server exactly.
        newest: tuple[float, Mapping[str, Any]] | None = None
        for spec in self.specs.values():
            found = self.instance.fetch_materializations(dg.AssetKey(spec.keys.points), limit=1).records
            materialization = found[0].asset_materialization if found else None
            if materialization is not None and (newest is None or found[0].timestamp > newest[0]):
                newest = (found[0].timestamp, materialization.metadata)
        if newest is not None:
            for collection in ("children", "parents"):
                value = getattr(newest[1].get(f"collection_{collection}_points"), "value", None)
                if isinstance(value, int | float):
                    out.add("rag_ingest_index_points", value, {"collection": collection})

    def _written_at(self) -> float | None:
        """When the index was last written: the embedded engine's record file, read without opening the store
        (which would take the folder from the search service or a step), else the server's collection metadata."""
        location = self._location
        if location.embedded:
            # EdgeVectorStore keeps index_info in <folder>/<children collection>.index.json, replaced whole on
            # each write (edge_store.py: _info_path); the test compares this with written_at() of the real store.
            info = location.path / f"{location.names.children}.index.json"
            if not info.exists():
                return None
            value = json.loads(info.read_text(encoding="utf-8")).get(WRITTEN_AT_KEY)
            return _epoch(str(value)) if value else None
        if self._server_store is None:
            self._server_store = open_vector_store(location)
        value = written_at(self._server_store)
        return _epoch(value) if value else None

    def _reports_part(self, out: _Families, now: datetime) -> None:
        folder = report_path(self.settings, "sync").parent
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("*.jsonl")):
            command = path.stem
            if not _REPORT_NAME.fullmatch(command):
                continue  # a stray file: its name would become a label
            stat = path.stat()
            key = (stat.st_mtime_ns, stat.st_size)
            cached = self._reports.get(path)
            if cached is None or cached[0] != key:
                cached = (key, self._count_report(path))
                self._reports[path] = cached
            out.add("rag_ingest_skipped_report_timestamp_seconds", stat.st_mtime, {"command": command})
            for source, count in sorted(cached[1].items()):
                out.add("rag_ingest_skipped_records", count, {"command": command, "source": source})

    def _count_report(self, path: Path) -> dict[str, int]:
        """Records of a report by source: a registered source's name (``slack``, also for ``slack directory``),
        anything else ``other``, so a report's text never becomes a label value. Every registered source has a
        series (0 when it skipped nothing)."""
        counts = dict.fromkeys(self.specs, 0)
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    named = str(json.loads(line).get("source", ""))
                except (ValueError, AttributeError):
                    named = ""
                first = named.split(" ", 1)[0]
                source = first if first in self.specs else "other"
                counts[source] = counts.get(source, 0) + 1
        return counts


def _run_status(run: dg.DagsterRun) -> str:
    """A run's status as one of :data:`RUN_STATUSES`."""
    if run.status == dg.DagsterRunStatus.SUCCESS:
        return "partial" if json.loads(run.tags.get(FAILED_CONTAINERS_TAG) or "{}") else "success"
    if run.status == dg.DagsterRunStatus.FAILURE:
        return "failure"
    if run.status == dg.DagsterRunStatus.CANCELED:
        return "canceled"
    return "in_progress"


def _epoch(instant: str | None) -> float:
    if not instant:
        return math.nan
    parsed = datetime.fromisoformat(instant)
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def ingest_registry(collector: IngestMetrics) -> CollectorRegistry:
    """A registry of its own holding ``collector`` (never the process-wide default: tests and two exporters in
    one process must not share figures)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def exposition(collector: IngestMetrics) -> str:
    """The collector's figures in Prometheus's text format (what ``--once`` prints)."""
    return generate_latest(ingest_registry(collector)).decode("utf-8")
