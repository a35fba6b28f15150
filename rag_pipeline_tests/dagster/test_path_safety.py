"""Hostile channel ids and project keys: they never become partitions, and a partition key registered around
discovery never makes the parquet IO manager write or read outside its folder."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pandas as pd
import pytest

from rag_pipeline.defs.chain.discovery import build_offline_source_discovery_sensor
from rag_pipeline.defs.chain.io_manager import PartitionedParquetIOManager, UnsafePartitionKey
from rag_pipeline.defs.chain.partitions import day_by_container_partitions, jira_projects, multi_key, slack_channels
from rag_pipeline.defs.jira.resources import JiraResource
from rag_pipeline.defs.slack.resources import SlackExportResource, SlackResource
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.jira.api import JiraApiReader, JiraSyncSettings
from rag_pipeline.sources.jira.client import build_jira_client
from rag_pipeline.sources.slack.api import SlackApiReader, build_web_client
from rag_pipeline_tests.kit import jira_fixtures as JF
from rag_pipeline_tests.kit import slack_fixtures as SF
from rag_pipeline_tests.kit.data import TEAM
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraProject as SiteProject
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.pipeline import chain, resources, spec

DAY = "2024-03-01"
SLACK_PARTITIONS = day_by_container_partitions("2024-01-01", "channel", slack_channels)
JIRA_PARTITIONS = day_by_container_partitions("2024-01-01", "project", jira_projects)
# /tmp/x is the path the issue names: checked before and after, never created by these tests.
ABSOLUTE_TARGET = "/tmp/x"
HOSTILE_IDS = [
    pytest.param("../../tmp/x", id="parent-traversal"),
    pytest.param("../../../outside", id="out-of-base"),
    pytest.param(ABSOLUTE_TARGET, id="absolute"),
    pytest.param("..", id="dotdot"),
    pytest.param("C01/../../x", id="inner-slash"),
    pytest.param("C" * 65, id="too-long"),
    pytest.param("x" * 5000, id="very-long"),
    pytest.param("kanäle", id="unicode"),
    pytest.param("Ｃ０１", id="fullwidth"),
    pytest.param("C01\u202e", id="bidi-control"),
    pytest.param(" C01", id="leading-blank"),
    pytest.param("-rf", id="leading-dash"),
    pytest.param("C01.parquet", id="dot"),
    pytest.param("C01\\..\\x", id="backslash"),
]
TOKEN = "xoxb-test-token"
JIRA_SITE, JIRA_USER, JIRA_TOKEN = "jira.example.test", "bot@example.com", "jira-test-token"


@pytest.fixture(autouse=True)
def _nothing_lands_in_tmp_x():
    """Every test here: /tmp/x is as it was (absent, unless something else on the machine made it)."""
    before = os.path.lexists(ABSOLUTE_TARGET)
    yield
    assert os.path.lexists(ABSOLUTE_TARGET) == before


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"id": ["doc-1"], "text": ["hello"]})


def _contexts(
    instance: dg.DagsterInstance, asset: str, key: str, partitions_def: dg.PartitionsDefinition
) -> tuple[dg.OutputContext, dg.InputContext]:
    out = dg.build_output_context(
        asset_key=asset, partition_key=key, asset_partitions_def=partitions_def, instance=instance
    )
    inp = dg.build_input_context(
        asset_key=asset, partition_key=key, asset_partitions_def=partitions_def, instance=instance
    )
    return out, inp


# --- the IO manager --------------------------------------------------------------------------------------------------
def test_valid_keys_keep_the_existing_layout(tmp_path: Path) -> None:
    base = tmp_path / "parquet"
    io = PartitionedParquetIOManager(base_dir=str(base))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(slack_channels.name, ["C0123ABC"])
        instance.add_dynamic_partitions(jira_projects.name, ["TIMOB"])
        for asset, key, partitions_def in (
            ("slack_threads", f"C0123ABC|{DAY}", SLACK_PARTITIONS),
            ("jira_issues", f"{DAY}|TIMOB", JIRA_PARTITIONS),
        ):
            out, inp = _contexts(instance, asset, key, partitions_def)
            io.handle_output(out, {key: _frame()})
            # A fresh IO manager reads from disk, not from the run's memory.
            assert PartitionedParquetIOManager(base_dir=str(base)).load_input(inp)[key].equals(_frame())
    # Dimensions in Dagster's key order (channel|date, date|project), no temp files left behind.
    assert _files(base) == {f"slack_threads/C0123ABC/{DAY}.parquet", f"jira_issues/{DAY}/TIMOB.parquet"}


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_hostile_container_keys_never_write_or_read_outside(tmp_path: Path, hostile: str) -> None:
    base = tmp_path / "data" / "parquet"
    base.mkdir(parents=True)
    io = PartitionedParquetIOManager(base_dir=str(base))
    key = str(multi_key(SLACK_PARTITIONS, DAY, hostile))
    # A parquet file where the old path join would have read it (when that is inside the temp folder).
    escaped = Path(os.path.normpath(base / "slack_threads" / hostile / f"{DAY}.parquet"))
    planted = escaped.is_relative_to(tmp_path) and not escaped.is_relative_to(base) and len(hostile) < 200
    if planted:
        escaped.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"secret": ["planted"]}).to_parquet(escaped)
    before = _files(tmp_path)
    with dg.instance_for_test() as instance:
        # Dagster itself accepts these as dynamic partitions: the IO manager is the last line.
        instance.add_dynamic_partitions(slack_channels.name, [hostile])
        out, inp = _contexts(instance, "slack_threads", key, SLACK_PARTITIONS)
        with pytest.raises(UnsafePartitionKey, match="not a valid id") as info:
            io.handle_output(out, {key: _frame()})
        assert repr(key)[:60] in str(info.value) or repr(hostile)[:40] in str(info.value)
        with pytest.raises(UnsafePartitionKey):
            io.load_input(inp)  # refused, never FileNotFoundError or the planted frame
    assert _files(tmp_path) == before


@pytest.mark.parametrize("hostile", [*HOSTILE_IDS, pytest.param("a|b", id="separator")])
def test_hostile_single_dimension_keys_are_refused(tmp_path: Path, hostile: str) -> None:
    things = dg.DynamicPartitionsDefinition(name="things")
    io = PartitionedParquetIOManager(base_dir=str(tmp_path / "parquet"))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("things", [hostile])
        out, inp = _contexts(instance, "things", hostile, things)
        with pytest.raises(UnsafePartitionKey):
            io.handle_output(out, {hostile: _frame()})
        with pytest.raises(UnsafePartitionKey):
            io.load_input(inp)
    assert _files(tmp_path) == set()


def test_the_containment_check_stands_on_its_own(tmp_path: Path) -> None:
    # Valid key parts, but an asset key that climbs out: the resolved path is still checked.
    io = PartitionedParquetIOManager(base_dir=str(tmp_path / "data" / "parquet"))
    with pytest.raises(UnsafePartitionKey, match="outside the data folder"):
        io._path(dg.AssetKey(["..", "..", "escaped"]), f"C01|{DAY}", SLACK_PARTITIONS)
    assert io._path(dg.AssetKey(["slack_threads"]), f"C01|{DAY}", SLACK_PARTITIONS) == Path(
        tmp_path, "data", "parquet", "slack_threads", "C01", f"{DAY}.parquet"
    )


def test_a_bad_key_in_a_range_writes_nothing_of_the_range(tmp_path: Path) -> None:
    io = PartitionedParquetIOManager(base_dir=str(tmp_path / "parquet"))
    things = dg.StaticPartitionsDefinition(["ok1", "ok2", "../x"])
    context = dg.build_output_context(
        asset_key="things", asset_partitions_def=things, asset_partition_key_range=dg.PartitionKeyRange("ok1", "../x")
    )
    with pytest.raises(UnsafePartitionKey):
        io.handle_output(context, {k: _frame() for k in ("ok1", "ok2", "../x")})
    assert _files(tmp_path) == set()


def test_a_crafted_partition_fails_the_run_end_to_end(tmp_path: Path, slack_export: Path) -> None:
    data = tmp_path / "data"
    res = resources(data)
    res["slack_export"] = res["slack_source"] = SlackExportResource(path=str(slack_export), team_id=TEAM)
    crafted = "../../../outside"
    before = _files(tmp_path)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(slack_channels.name, [crafted])
        result = dg.materialize(
            chain("slack"),
            selection=["slack_threads"],
            instance=instance,
            resources=res,
            partition_key=multi_key(spec("slack").partitions, DAY, crafted),
            raise_on_error=False,
        )
    assert not result.success
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert len(failures) == 1 and crafted in str(failures[0].step_failure_data.error)
    # Refused once: the raw asset's retry policy (minutes of backoff) does not apply to a key that can never work.
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    # Nothing outside the data folder (nor any parquet for the crafted key inside it).
    assert {f for f in _files(tmp_path) - before if not f.startswith("data/")} == set()
    assert not (tmp_path / "outside").exists() and not list(data.rglob("*.parquet"))


# --- discovery -------------------------------------------------------------------------------------------------------
def _slack_workspace_with_hostile_ids():
    ws = SF.crafted_workspace()
    ws.add_channel("../../tmp/x", "escape", members=[SF.ALICE])
    ws.add_channel("C01|2024-03-01", "pipe", members=[SF.ALICE])
    ws.add_channel("x" * 300, "n\nl" * 100, members=[SF.ALICE])
    return ws


def test_slack_reader_discovery_skips_invalid_ids_and_channels_the_bot_is_not_in() -> None:
    with SlackEmulator(_slack_workspace_with_hostile_ids()) as emu:
        reader = SlackApiReader(build_web_client(TOKEN, emu.base_url, stats=ApiStats()))
        found = reader.discover()
    assert sorted(c.id for c in found.channels) == sorted([SF.GENERAL_CHANNEL, SF.SHARED_CHANNEL, SF.PRIVATE_CHANNEL])
    assert [c.name for c in found.not_member] == ["watercooler"]
    reasons = [str(p) for p in found.problems]
    assert len(reasons) == 3 and all("is not a valid id" in r for r in reasons)
    assert any("'../../tmp/x'" in r and "#escape" in r for r in reasons)
    # Names are shown printable and capped, never a multi-line dump.
    assert all("\n" not in r and len(r) < 400 for r in reasons)


def test_slack_discovery_sensor_skips_and_reports(capfd: pytest.CaptureFixture[str]) -> None:
    sensor = spec("slack").live.discovery_sensor
    with SlackEmulator(_slack_workspace_with_hostile_ids()) as emu, dg.instance_for_test() as instance:
        slack = SlackResource(token=TOKEN, base_url=emu.base_url)
        # The tick's log (Dagster's console logger in a test: stderr).
        result = sensor(dg.build_sensor_context(instance=instance, resources={"slack": slack}))
        added = result.dynamic_partitions_requests[0].partition_keys
        assert sorted(added) == sorted([SF.GENERAL_CHANNEL, SF.SHARED_CHANNEL, SF.PRIVATE_CHANNEL])
        assert not result.run_requests  # the sync sensor requests the new channels' history
        cursor = json.loads(result.cursor)
        assert cursor["channels"] == sorted(added)
        assert cursor["skipped"]["not_member"] == [f"#watercooler ({SF.NOJOIN_CHANNEL})"]
        assert len(cursor["skipped"]["invalid"]) == 3
        logged = capfd.readouterr().err
        assert "WARNING" in logged and "#watercooler" in logged and "'../../tmp/x'" in logged
        # The next tick has nothing new: the skips are its skip message.
        instance.add_dynamic_partitions(slack_channels.name, added)
        again = sensor(dg.build_sensor_context(instance=instance, resources={"slack": slack}))
        assert not again.run_requests and not again.dynamic_partitions_requests
        message = again.skip_reason.skip_message
        assert "no new channels" in message and "#watercooler" in message and "'../../tmp/x'" in message
        assert set(instance.get_dynamic_partitions(slack_channels.name)) == set(added)


def _jira_site_with_hostile_keys():
    site = JF.crafted_site()
    # Straight into the site: its add_project refuses such keys, a real (or compromised) server need not.
    for n, key in enumerate(["../../tmp/x", "A|B", "K" * 100]):
        site.projects[key] = SiteProject(id=str(90000 + n), key=key, name=f"Hostile {n}", index=len(site.projects))
    return site


@pytest.mark.parametrize("cloud", [True, False], ids=["cloud", "server"])
def test_jira_reader_discovery_skips_invalid_keys(cloud: bool) -> None:
    with JiraEmulator(_jira_site_with_hostile_keys(), cloud=cloud) as emu:
        auth = {"username": JIRA_USER, "api_token": JIRA_TOKEN} if cloud else {"personal_access_token": "jira-test-pat"}
        client = build_jira_client(emu.url, cloud=cloud, stats=ApiStats(), backoff_seconds=0, **auth)
        found = JiraApiReader(client, JiraSyncSettings(cloud=cloud, site=JIRA_SITE)).discover()
    assert [p.key for p in found.projects] == ["NEW", "OPS", "SEC"]
    reasons = [str(p) for p in found.problems]
    assert len(reasons) == 3 and all("is not a valid id" in r for r in reasons)
    assert any("'../../tmp/x'" in r and "Hostile 0" in r for r in reasons)


def test_jira_discovery_sensor_skips_and_reports(capfd: pytest.CaptureFixture[str]) -> None:
    sensor = spec("jira").live.discovery_sensor
    with JiraEmulator(_jira_site_with_hostile_keys()) as emu, dg.instance_for_test() as instance:
        jira = JiraResource(url=emu.url, username=JIRA_USER, api_token=JIRA_TOKEN, site=JIRA_SITE, backoff_seconds=0)
        result = sensor(dg.build_sensor_context(instance=instance, resources={"jira": jira}))
        added = result.dynamic_partitions_requests[0].partition_keys
        assert sorted(added) == ["NEW", "OPS", "SEC"]
        assert len(json.loads(result.cursor)["skipped"]["invalid"]) == 3
        assert "'../../tmp/x'" in capfd.readouterr().err
        instance.add_dynamic_partitions(jira_projects.name, added)
        again = sensor(dg.build_sensor_context(instance=instance, resources={"jira": jira}))
        assert not again.dynamic_partitions_requests and "'A|B'" in again.skip_reason.skip_message
        assert set(instance.get_dynamic_partitions(jira_projects.name)) == set(added)


class _FakeOffline:
    """An offline source whose documents carry the given containers (stands in for any reader)."""

    def __init__(self, containers: list[str]) -> None:
        self.containers = containers
        self.path = "unused"

    def read(self) -> SimpleNamespace:
        return SimpleNamespace(documents=[SimpleNamespace(container=c) for c in self.containers])


def test_offline_discovery_sensor_skips_and_reports(capfd: pytest.CaptureFixture[str]) -> None:
    sensor = build_offline_source_discovery_sensor([spec("slack"), spec("jira")])
    slack = _FakeOffline(["C0PUB", "../../tmp/x", "C0PUB|2024-03-01", "é"])
    jira = _FakeOffline(["TIMOB", "/tmp/x"])
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, resources={"slack_export": slack, "jira_dump": jira})
        result = sensor(context)
        added = {r.partitions_def_name: r.partition_keys for r in result.dynamic_partitions_requests}
        assert added == {"slack_channels": ["C0PUB"], "jira_projects": ["TIMOB"]}
        cursor = json.loads(result.cursor)
        assert cursor["skipped"] == {
            "channels": sorted([repr("../../tmp/x"), repr("C0PUB|2024-03-01"), repr("é")]),
            "projects": [repr("/tmp/x")],
        }
        assert "'../../tmp/x'" in capfd.readouterr().err
        instance.add_dynamic_partitions("slack_channels", ["C0PUB"])
        instance.add_dynamic_partitions("jira_projects", ["TIMOB"])
        again = sensor(context)
        assert not again.dynamic_partitions_requests and "'/tmp/x'" in again.skip_reason.skip_message


# --- the default Slack sync ------------------------------------------------------------------------------------------
def test_sync_of_every_channel_skips_the_ones_the_bot_is_not_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog
) -> None:
    from rag_pipeline.cli import main

    with SlackEmulator(_slack_workspace_with_hostile_ids()) as emu:
        monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
        monkeypatch.setenv("SLACK_API_BASE_URL", emu.base_url)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
        (tmp_path / "home").mkdir()
        with caplog.at_level(logging.WARNING):
            code = main(
                ["sync", "--source", "slack", "--start", "2024-03-01", "--end", "2024-03-12",
                 "--data-dir", str(tmp_path / "data"), "--json"]
            )  # fmt: skip
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out["failed"] == {}
        assert sorted(out["containers"]) == ["general", "partner-shared", "security"]
        assert not any(r.params.get("channel") == SF.NOJOIN_CHANNEL for r in emu.requests)  # never even tried
    warnings = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "not a member" in warnings and "#watercooler" in warnings
    # The listing with a hostile id is a skipped record of the sync's report (stderr and --json).
    assert any("'../../tmp/x'" in e["reason"] for e in out["skipped"]["examples"])
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert sorted(instance.get_dynamic_partitions(slack_channels.name)) == sorted(
            [SF.GENERAL_CHANNEL, SF.SHARED_CHANNEL, SF.PRIVATE_CHANNEL]
        )
    # Only the readable channels have parquet folders, all under the data folder.
    written = {p.parent.name for p in (tmp_path / "data" / "parquet" / "slack_threads").glob("*/*.parquet")}
    assert written and written <= {SF.GENERAL_CHANNEL, SF.SHARED_CHANNEL, SF.PRIVATE_CHANNEL}
