"""The ingestion exporter (``rag-pipeline metrics``): a real sync run against the Slack emulator, read back through
Prometheus's own text parser, agrees with the planner's watermarks, the ``containers_within_lag`` check, the
run's points step and the index's own record; per-container series stay bounded; the HTTP server answers a scrape
and serves a cached computation; a part that cannot be read leaves the others served; nothing secret is exported.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from rag_pipeline.commands import metrics as metrics_command
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.defs.chain.resources import qdrant_resource
from rag_pipeline.defs.parts import source_specs
from rag_pipeline.defs.sync.sensor import build_lag_check
from rag_pipeline.index.index_info import written_at
from rag_pipeline.pipeline.policy import sync_policy
from rag_pipeline.runs.dagster_private import make_new_run_id
from rag_pipeline.runs.ingest_metrics import (
    METRICS,
    ExporterOptions,
    IngestMetrics,
    exposition,
    ingest_registry,
    lag_bound,
)
from rag_pipeline.runs.skipped import Skipped, report_path
from rag_pipeline.runs.sync_runs import source_states, sync_request
from rag_pipeline.runs.sync_status import source_status
from rag_pipeline.scheduling.plan import RangeRequest
from rag_pipeline.settings import Settings
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.pipeline import settings_for
from rag_pipeline_tests.kit.sync_harness import SyncHarness, container_results

TOKEN = "xoxb-test-token"  # what the emulator accepts
SERVE_TOKEN = "serve-secret-never-exported"
QDRANT_KEY = "qdrant-key-never-exported"
PLANNED = datetime(2024, 3, 12, 10, 0, 30, tzinfo=UTC)

Samples = dict[str, dict[frozenset[tuple[str, str]], float]]


def _samples(text: str) -> Samples:
    """Sample name -> labels -> value, through prometheus_client's parser; every family is one of METRICS, with
    its HELP, type and labels (the table docs/notes/ingest_metrics.md shows)."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        kind, documentation, labels = METRICS[family.name]
        assert (family.type, family.documentation) == (kind, documentation), family.name
        for sample in family.samples:
            assert set(sample.labels) == set(labels), (sample.name, sample.labels)
            out.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return out


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name][frozenset(labels.items())]


def _containers(samples: Samples, name: str, source: str) -> dict[str, float]:
    """A per-container family of one source as container -> value."""
    return {
        dict(key)["container"]: value for key, value in samples.get(name, {}).items() if dict(key)["source"] == source
    }


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[SlackEmulator]:
    with SlackEmulator(F.crafted_workspace()) as emu:
        for name in ("JIRA_URL", "RAG_NOTIFY_SLACK_CHANNEL", "DAGSTER_HOME", "QDRANT_URL", "RAG_INGESTION_PAUSED"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
        monkeypatch.setenv("SLACK_API_BASE_URL", emu.base_url)
        monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
        # Secrets the process holds: none may reach the exposition.
        monkeypatch.setenv("RAG_SERVE_TOKEN", SERVE_TOKEN)
        monkeypatch.setenv("QDRANT_API_KEY", QDRANT_KEY)
        yield emu


def _behind(check: dg.AssetChecksDefinition, instance: dg.DagsterInstance) -> int:
    """How many containers the ``containers_within_lag`` check finds behind (its metadata)."""
    result = check(dg.build_asset_check_context(instance=instance))
    assert isinstance(result, dg.AssetCheckResult)
    return int(str(result.metadata["behind"].value))


def _collect(instance: dg.DagsterInstance, settings: Settings, now: datetime, max_containers: int = 20) -> str:
    """The exposition computed for ``now`` (no cache: each call reads the instance again)."""
    options = ExporterOptions(cache_seconds=0, max_containers=max_containers)
    return exposition(IngestMetrics(instance, settings, options, clock=lambda: now))


def test_a_real_sync_run_is_exported_as_the_planner_and_the_lag_check_see_it(slack: SlackEmulator) -> None:
    # #partner-shared cannot be read (its history repeats a cursor): the run succeeds for the two others.
    slack.inject("repeat_cursor", method="conversations.history", count=None, channel=F.SHARED_CHANNEL)
    settings = settings_for()
    with dg.instance_for_test() as instance:
        h = SyncHarness(settings, "slack", instance, now=PLANNED)
        h.discover()
        results = h.execute(h.plan())
        assert container_results(instance, results) == {
            F.GENERAL_CHANNEL: True,
            F.SHARED_CHANNEL: False,
            F.PRIVATE_CHANNEL: True,
        }
        (result,) = results
        points = result.asset_materializations_for_node(h.spec.keys.points)[0].metadata
        states = {s.container: s for s in source_states(instance, h.spec)[0]}
        watermark = states[F.GENERAL_CHANNEL].watermark
        assert watermark == PLANNED  # a tick makes good the instant it was planned
        with qdrant_resource(settings).open() as store:
            recorded = written_at(store)
        assert recorded is not None
        # What `rag-pipeline sync` leaves when records were turned away (the real writer).
        skipped = Skipped()
        skipped.add("slack", [RecordProblem("general/2024-03-01.json:3", "no ts"), RecordProblem("x:1", "bad")])
        skipped.add("slack directory", [RecordProblem("users.list:U1", "no id")])
        skipped.add("jira", [RecordProblem("ISSUE-1", "no key")])
        skipped.write(report_path(settings, "sync"))

        cron = settings.automation.sync("slack").cron
        policy = sync_policy(settings, "slack")
        # Ten minutes after the run: the failed channel (never synced) is the one behind, like the check says.
        clock = PLANNED + timedelta(minutes=10)
        check = build_lag_check(h.spec, cron, policy, clock=lambda: clock)
        text = _collect(instance, settings, clock)
        s = _samples(text)
        assert _value(s, "rag_ingest_containers_behind", source="slack") == _behind(check, instance) == 1
        assert _value(s, "rag_ingest_containers", source="slack") == 3
        assert _value(s, "rag_ingest_containers_failing", source="slack") == 1
        assert _value(s, "rag_ingest_latest_run_failed_containers", source="slack") == 1
        assert _value(s, "rag_ingest_last_success_timestamp_seconds", source="slack") == watermark.timestamp()
        assert _value(s, "rag_ingest_lag_seconds", source="slack") == pytest.approx(600, abs=1)
        bound = lag_bound(cron, policy, clock).total_seconds()
        assert _value(s, "rag_ingest_lag_bound_seconds", source="slack") == bound == 4 * 3600  # 2 hourly + 2 h settle
        # Per container: only the one to look at, never synced (0) and failing.
        assert _containers(s, "rag_ingest_container_last_success_timestamp_seconds", "slack") == {F.SHARED_CHANNEL: 0}
        assert _containers(s, "rag_ingest_container_failing", "slack") == {F.SHARED_CHANNEL: 1}
        assert _containers(s, "rag_ingest_container_lag_seconds", "slack") == {}
        # The run: succeeded with a channel it could not read ("partial"); what its points step wrote.
        runs = {dict(k)["status"]: v for k, v in s["rag_ingest_runs"].items() if dict(k)["source"] == "slack"
                and dict(k)["kind"] == "sync"}  # fmt: skip
        assert runs == {"success": 0, "partial": 1, "failure": 0, "canceled": 0, "in_progress": 0}
        documents_written = int(str(points["documents_written"].value))
        assert _value(s, "rag_ingest_documents_written", source="slack") == documents_written > 0
        assert _value(s, "rag_ingest_index_points", collection="children") == points["collection_children_points"].value
        assert _value(s, "rag_ingest_index_written_timestamp_seconds") == datetime.fromisoformat(recorded).timestamp()
        # The report's records by source ("slack directory" counts for slack).
        assert _value(s, "rag_ingest_skipped_records", command="sync", source="slack") == 3
        assert _value(s, "rag_ingest_skipped_records", command="sync", source="jira") == 1
        assert {_value(s, "rag_ingest_collect_ok", part=p) for p in ("sync", "runs", "index", "reports")} == {1}
        # Nothing secret, no message text, no error text.
        status = source_status(instance, h.spec, cron, policy, True, clock)
        error = next(c.last_failure for c in status.containers if c.container == F.SHARED_CHANNEL)
        assert error is not None and error["error"]
        for secret in (TOKEN, SERVE_TOKEN, QDRANT_KEY, "xoxb", error["error"], F.EDITED_ROOT_TEXT, "password"):
            assert secret not in text, secret

        # Five hours later every channel is past the bound (4 h): all three behind, with their lags.
        clock = PLANNED + timedelta(hours=5)
        s = _samples(_collect(instance, settings, clock))
        assert _value(s, "rag_ingest_containers_behind", source="slack") == _behind(check, instance) == 3
        lag = _value(s, "rag_ingest_lag_seconds", source="slack")
        assert lag == pytest.approx(5 * 3600, abs=1) and lag > bound
        lags = _containers(s, "rag_ingest_container_lag_seconds", "slack")
        assert set(lags) == {F.GENERAL_CHANNEL, F.PRIVATE_CHANNEL} and min(lags.values()) > bound

        # Bounded: one series per source at most here, the worst first (never synced), the rest counted.
        s = _samples(_collect(instance, settings, clock, max_containers=1))
        assert set(_containers(s, "rag_ingest_container_failing", "slack")) == {F.SHARED_CHANNEL}
        assert _value(s, "rag_ingest_container_series_omitted", source="slack") == 2


def _record_run(
    instance: dg.DagsterInstance,
    settings: Settings,
    channels: list[str],
    planned: datetime,
    status: dg.DagsterRunStatus,
) -> None:
    """A sync run of ``channels`` as the sensor requests it (sync_request), recorded finished with ``status``:
    what the planner, ``rag-pipeline status`` and the exporter read."""
    spec = source_specs(settings)["slack"]
    requests = [RangeRequest(c, planned.date(), planned.date(), None, planned, "initial history", 1) for c in channels]
    tags, run_config = sync_request(spec, requests, planned)
    instance.add_run(
        dg.DagsterRun(job_name="__ASSET_JOB", run_id=make_new_run_id(), run_config=run_config, tags=tags, status=status)
    )


def test_the_http_exporter_answers_a_scrape_serves_its_cache_and_survives_a_broken_part(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("SLACK_BOT_TOKEN", "JIRA_URL", "DAGSTER_HOME", "QDRANT_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = settings_for(tmp_path / "data")  # no token: the discovered channels make slack reported
    now = datetime.now(UTC)
    channels = ["C0000000A1", "C0000000B2"]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("slack_channels", channels)
        _record_run(instance, settings, channels, now - timedelta(hours=2), dg.DagsterRunStatus.SUCCESS)
        _record_run(instance, settings, channels, now - timedelta(hours=1), dg.DagsterRunStatus.FAILURE)
        # A report the exporter cannot read (a folder where the file should be): that part fails alone.
        report_path(settings, "index").mkdir(parents=True)
        collector = IngestMetrics(instance, settings, ExporterOptions(cache_seconds=600))
        server, thread = metrics_command.start_server(ingest_registry(collector), "127.0.0.1", 0)
        try:
            url = f"http://127.0.0.1:{server.server_port}/metrics"
            response = httpx.get(url, timeout=30)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/plain")
            s = _samples(response.text)
            runs = {dict(k)["status"]: v for k, v in s["rag_ingest_runs"].items()
                    if dict(k)["source"] == "slack" and dict(k)["kind"] == "sync"}  # fmt: skip
            assert (runs["success"], runs["failure"]) == (1, 1)
            # The failed run was the latest: both its channels failed in it, and both are failing since.
            assert _value(s, "rag_ingest_latest_run_failed_containers", source="slack") == 2
            assert _value(s, "rag_ingest_containers_failing", source="slack") == 2
            assert _value(s, "rag_ingest_containers_behind", source="slack") == 0  # synced 2 h ago, bound 4 h
            assert _value(s, "rag_ingest_collect_ok", part="reports") == 0
            assert _value(s, "rag_ingest_collect_ok", part="sync") == 1
            assert "rag_ingest_skipped_records" not in s

            # A new run within the cache's life: the scrape serves the same computation ...
            _record_run(instance, settings, channels, now, dg.DagsterRunStatus.SUCCESS)
            again = _samples(httpx.get(url, timeout=30).text)
            assert again["rag_ingest_collected_timestamp_seconds"] == s["rag_ingest_collected_timestamp_seconds"]
            assert _value(again, "rag_ingest_containers_failing", source="slack") == 2
            # ... and a fresh one sees the run: the channels are no longer failing.
            fresh = _samples(exposition(IngestMetrics(instance, settings, ExporterOptions(cache_seconds=0))))
            assert _value(fresh, "rag_ingest_containers_failing", source="slack") == 0
            assert _value(fresh, "rag_ingest_latest_run_failed_containers", source="slack") == 0
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)
        assert not thread.is_alive()


def test_the_command_prints_once_refuses_a_taken_port_and_keeps_the_collectors_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("SLACK_BOT_TOKEN", "JIRA_URL", "DAGSTER_HOME", "QDRANT_URL", "RAG_INGESTION_PAUSED"):
        monkeypatch.delenv(name, raising=False)
    parser = argparse.ArgumentParser()
    metrics_command.add_parser(parser.add_subparsers())
    defaults = parser.parse_args(["metrics"])
    options = ExporterOptions()
    assert (defaults.host, defaults.once) == ("127.0.0.1", False)  # loopback unless told otherwise
    assert defaults.cache_seconds == options.cache_seconds
    assert timedelta(hours=defaults.window_hours) == options.window
    assert defaults.max_containers == options.max_containers

    # --once on a new data folder: its own instance (<data>/dagster_home), every part read, nothing paused.
    data = tmp_path / "data"
    args = parser.parse_args(["metrics", "--once", "--data-dir", str(data)])
    settings = Settings.from_env().with_data_dir(args.data_dir)
    assert args.func(args, settings) == 0
    s = _samples(capsys.readouterr().out)
    assert {_value(s, "rag_ingest_collect_ok", part=p) for p in ("sync", "runs", "index", "reports")} == {1}
    assert _value(s, "rag_ingest_paused") == 0
    assert _value(s, "rag_ingest_window_seconds") == 24 * 3600
    assert "rag_ingest_containers" not in s  # no live source and no discovered channel: no sync to report
    assert (data / "dagster_home" / "dagster.yaml").exists()

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=f"cannot listen on 127.0.0.1:{port}"):
            metrics_command.start_server(CollectorRegistry(), "127.0.0.1", port)
