"""Hostile channel ids and project keys: they never become partitions, a container registered around discovery
never names a path (containers are values inside a week's file), and a partition key that is not a week never
makes the parquet IO manager write or read anything."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pandas as pd
import pytest

from rag_pipeline.connectors.jira.api import JiraApiReader, JiraSyncSettings
from rag_pipeline.connectors.jira.client import build_jira_client
from rag_pipeline.connectors.slack.api import SlackApiReader, build_web_client
from rag_pipeline.defs.chain.discovery import build_offline_source_discovery_sensor
from rag_pipeline.defs.chain.io_manager import PartitionedParquetIOManager, UnsafePartitionKey
from rag_pipeline.defs.chain.partitions import weekly_partitions
from rag_pipeline.defs.jira.resources import JiraResource
from rag_pipeline.defs.slack.resources import SlackExportResource, SlackResource
from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline_tests.kit import jira_fixtures as JF
from rag_pipeline_tests.kit import slack_fixtures as SF
from rag_pipeline_tests.kit.data import TEAM
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraProject as SiteProject
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.pipeline import chain, resources, spec

DAY = "2024-03-01"
WEEK = week_key(DAY)
WEEKS = weekly_partitions("2024-01-01")
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
def test_week_keys_name_one_file_per_asset_and_week(tmp_path: Path) -> None:
    base = tmp_path / "parquet"
    io = PartitionedParquetIOManager(base_dir=str(base))
    with dg.instance_for_test() as instance:
        for asset in ("slack_threads", "jira_issues"):
            out, inp = _contexts(instance, asset, WEEK, WEEKS)
            io.handle_output(out, {WEEK: _frame()})
            # A fresh IO manager reads from disk, not from the run's memory.
            assert PartitionedParquetIOManager(base_dir=str(base)).load_input(inp)[WEEK].equals(_frame())
    # No temp files left behind.
    assert _files(base) == {f"slack_threads/{WEEK}.parquet", f"jira_issues/{WEEK}.parquet"}


@pytest.mark.parametrize("hostile", [*HOSTILE_IDS, pytest.param("a|b", id="separator"), pytest.param(DAY + "x")])
def test_keys_that_are_not_weeks_are_refused(tmp_path: Path, hostile: str) -> None:
    things = dg.DynamicPartitionsDefinition(name="things")
    io = PartitionedParquetIOManager(base_dir=str(tmp_path / "parquet"))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("things", [hostile])
        out, inp = _contexts(instance, "things", hostile, things)
        with pytest.raises(UnsafePartitionKey, match="is not a week"):
            io.handle_output(out, {hostile: _frame()})
        with pytest.raises(UnsafePartitionKey):
            io.load_input(inp)
    assert _files(tmp_path) == set()


def test_the_containment_check_stands_on_its_own(tmp_path: Path) -> None:
    # A valid key, but an asset key that climbs out: the resolved path is still checked.
    io = PartitionedParquetIOManager(base_dir=str(tmp_path / "data" / "parquet"))
    with pytest.raises(UnsafePartitionKey, match="outside the data folder"):
        io._path(dg.AssetKey(["..", "..", "escaped"]), WEEK)
    assert io._path(dg.AssetKey(["slack_threads"]), WEEK) == Path(
        tmp_path, "data", "parquet", "slack_threads", f"{WEEK}.parquet"
    )


def test_a_bad_key_in_a_range_writes_nothing_of_the_range(tmp_path: Path) -> None:
    io = PartitionedParquetIOManager(base_dir=str(tmp_path / "parquet"))
    things = dg.StaticPartitionsDefinition(["2024-01-01", "2024-01-08", "../x"])
    context = dg.build_output_context(
        asset_key="things",
        asset_partitions_def=things,
        asset_partition_key_range=dg.PartitionKeyRange("2024-01-01", "../x"),
    )
    with pytest.raises(UnsafePartitionKey):
        io.handle_output(context, {k: _frame() for k in ("2024-01-01", "2024-01-08", "../x")})
    assert _files(tmp_path) == set()


@pytest.mark.parametrize("crafted", ["../../../outside", "/tmp/x", "C01|2024-03-01"])
def test_a_crafted_container_never_names_a_path(tmp_path: Path, slack_export: Path, crafted: str) -> None:
    data = tmp_path / "data"
    res = resources(data)
    res["slack_export"] = res["slack_source"] = SlackExportResource(path=str(slack_export), team_id=TEAM)
    before = _files(tmp_path)
    with dg.instance_for_test() as instance:
        # Registered around discovery (by hand, the UI or the instance API), and named in the run's config.
        instance.add_dynamic_partitions("slack_channels", [crafted])
        result = dg.materialize(
            chain("slack"),
            selection=["slack_threads"],
            instance=instance,
            resources=res,
            partition_key=WEEK,
            run_config={"ops": {"slack_threads": {"config": {"containers": [crafted]}}}},
            raise_on_error=False,
        )
    assert result.success
    # Nothing outside the data folder, and no document of the crafted container (none can have its id).
    assert {f for f in _files(tmp_path) - before if not f.startswith("data/")} == set()
    assert not (tmp_path / "outside").exists()
    for file in data.rglob("*.parquet"):
        assert crafted not in set(pd.read_parquet(file)["_container"])


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
        instance.add_dynamic_partitions("slack_channels", added)
        again = sensor(dg.build_sensor_context(instance=instance, resources={"slack": slack}))
        assert not again.run_requests and not again.dynamic_partitions_requests
        message = again.skip_reason.skip_message
        assert "no new channels" in message and "#watercooler" in message and "'../../tmp/x'" in message
        assert set(instance.get_dynamic_partitions("slack_channels")) == set(added)


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
        instance.add_dynamic_partitions("jira_projects", added)
        again = sensor(dg.build_sensor_context(instance=instance, resources={"jira": jira}))
        assert not again.dynamic_partitions_requests and "'A|B'" in again.skip_reason.skip_message
        assert set(instance.get_dynamic_partitions("jira_projects")) == set(added)


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
        assert sorted(instance.get_dynamic_partitions("slack_channels")) == sorted(
            [SF.GENERAL_CHANNEL, SF.SHARED_CHANNEL, SF.PRIVATE_CHANNEL]
        )
    # Only the readable channels have rows, all in weekly files under the data folder.
    files = list((tmp_path / "data" / "parquet" / "slack_threads").glob("*.parquet"))
    written = {c for p in files for c in pd.read_parquet(p)["_container"]}
    assert written and written <= {SF.GENERAL_CHANNEL, SF.SHARED_CHANNEL, SF.PRIVATE_CHANNEL}
