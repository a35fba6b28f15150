"""The live Slack connector: the real slack-sdk WebClient against the Slack Web API emulator."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.connectors.slack.api import (
    SlackAccessError,
    SlackApiReader,
    SlackSyncSettings,
    build_web_client,
)
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.connectors.slack.threads import thread_document_id, workspace_group
from rag_pipeline.defs.slack.resources import SlackResource
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames, SearchFilter
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace
from rag_pipeline_tests.kit.pipeline import cell, chain, resources, settings_for, spec

TOKEN = "xoxb-test-token"
MARCH = [f"2024-03-{d:02d}" for d in range(1, 13)]
CHAIN = chain("slack")
SLACK_LIVE = spec("slack").live
slack_reconciliation, slack_channel_discovery_sensor = SLACK_LIVE.reconciliation, SLACK_LIVE.discovery_sensor


def _reader(emu: SlackEmulator, **settings) -> SlackApiReader:
    return SlackApiReader(build_web_client(TOKEN, emu.base_url, stats=ApiStats()), SlackSyncSettings(**settings))


def _doc_id(channel: str, ts: str) -> str:
    return thread_document_id(F.CRAFTED_TEAM, channel, ts)


@pytest.fixture
def crafted():
    with SlackEmulator(F.crafted_workspace()) as emu:
        yield emu


def _export_documents(ws: SlackWorkspace, tmp: Path) -> dict:
    ws.write_export(tmp)
    return {d.id: d for d in SlackExportReader(tmp, ws.team_id, ws.domain).read().documents}


# --- same documents as the export reader -------------------------------------------------------
@pytest.mark.parametrize("page_size,max_limit", [(200, 1000), (15, 15)])
def test_api_documents_equal_export_documents_crafted(tmp_path: Path, page_size: int, max_limit: int) -> None:
    ws = F.crafted_workspace()
    expected = _export_documents(ws, tmp_path)
    with SlackEmulator(ws, max_limit=max_limit) as emu:
        reader = _reader(emu, page_size=page_size)
        discovery = reader.discover()
        channels = {c.id: c for c in discovery.channels}
        # Archived skipped by default, the hidden private channel is never listed, the public channel the bot
        # is not in (history: not_in_channel) is reported instead of kept.
        assert set(channels) == {F.GENERAL_CHANNEL, F.SHARED_CHANNEL, F.PRIVATE_CHANNEL}
        assert [c.id for c in discovery.not_member] == [F.NOJOIN_CHANNEL] and not discovery.problems
        got = {}
        for cid in (F.GENERAL_CHANNEL, F.SHARED_CHANNEL, F.PRIVATE_CHANNEL):
            read = reader.read_days(cid, MARCH)
            assert all(read.partition_day[d.id] == d.day for d in read.documents)
            got.update({d.id: d for d in read.documents})
        if page_size == 15:
            assert all(int(r.params["limit"]) == 15 for r in emu.calls("conversations.history"))
            assert len(emu.calls("conversations.history")) > 3  # #general needed several pages
            # The cap concerns messages; listings still ask for 200 (the emulator caps them at 15 here).
            assert {r.params["limit"] for r in emu.calls("users.list")} == {"200"}
    wanted = {k: v for k, v in expected.items() if v.container in got_containers(got)}
    assert got == wanted
    # Bots, joins and tombstone text dropped; external and deactivated users named; mentions resolved.
    general = "\n".join(d.text for d in got.values() if d.container == F.GENERAL_CHANNEL)
    assert "has joined" not in general and "This message was deleted" not in general
    assert "@Bob" in general or "@bob" in general.lower()
    tomb = got[_doc_id(F.GENERAL_CHANNEL, F.TOMBSTONE_ROOT_TS)]
    assert tomb.metadata["root_deleted"] and F.TOMBSTONE_ORIGINAL_TEXT not in tomb.text
    private = got[_doc_id(F.PRIVATE_CHANNEL, F.PRIVATE_THREAD_ROOT_TS)]
    assert private.acl.groups == () and set(private.acl.users) == {F.ALICE, F.CAROL, F.BOT_USER}
    shared = got[_doc_id(F.SHARED_CHANNEL, F.SHARED_ROOT_TS)]
    assert shared.acl.groups == (workspace_group(F.CRAFTED_TEAM),) and shared.acl.users == (F.EXTERNAL_USER,)


def got_containers(docs: dict) -> set[str]:
    return {d.container for d in docs.values()}


def test_api_documents_equal_export_documents_bundled(tmp_path: Path) -> None:
    ws = F.bundled_workspace()
    expected = _export_documents(ws, tmp_path)
    days = sorted({d.day for d in expected.values()})
    with SlackEmulator(ws) as emu:
        read = _reader(emu).read_days(F.BUNDLED_CHANNEL, days)
    assert len(expected) == 908
    assert {d.id: d for d in read.documents} == expected


# --- incremental semantics ----------------------------------------------------------------------
def test_late_reply_lands_in_the_day_it_was_posted(crafted: SlackEmulator) -> None:
    late_day = "2024-03-11"
    thread = _doc_id(F.GENERAL_CHANNEL, F.LATE_REPLY_ROOT_TS)
    read = _reader(crafted).read_days(F.GENERAL_CHANNEL, [late_day])
    docs = {d.id: d for d in read.documents}
    assert read.partition_day[thread] == late_day and docs[thread].day == late_day
    assert docs[thread].metadata["message_count"] == 4  # root, two same-day replies, the late reply
    # The root's own day no longer owns the thread when both days are synced together.
    both = _reader(crafted).read_days(F.GENERAL_CHANNEL, ["2024-03-01", late_day])
    assert both.partition_day[thread] == late_day
    # Without enough lookback the root (10 days older) is not re-listed: the bound is real.
    short = _reader(crafted, lookback_days=5).read_days(F.GENERAL_CHANNEL, [late_day])
    assert thread not in {d.id for d in short.documents}
    assert float(crafted.calls("conversations.history")[-1].params["oldest"]) > float(F.LATE_REPLY_ROOT_TS)


def test_root_edit_gives_a_new_version_on_the_edit_day(crafted: SlackEmulator) -> None:
    doc_id = _doc_id(F.GENERAL_CHANNEL, F.EDITED_ROOT_TS)
    read = _reader(crafted).read_days(F.GENERAL_CHANNEL, ["2024-03-05"])
    doc = next(d for d in read.documents if d.id == doc_id)
    assert doc.version == float(F.EDIT_TS) and doc.day == "2024-03-05"
    assert "Monday (moved)" in doc.text and "Friday" not in doc.text
    # A later edit through the API moves the thread to that day with a higher version.
    crafted.workspace.edit(F.GENERAL_CHANNEL, F.EDITED_ROOT_TS, "Release train moved again", F.march_ts(12, 9))
    again = _reader(crafted).read_days(F.GENERAL_CHANNEL, ["2024-03-12"])
    newer = next(d for d in again.documents if d.id == doc_id)
    assert newer.version > doc.version and "moved again" in newer.text


def test_reply_edit_in_a_quiet_thread_needs_the_rescan(crafted: SlackEmulator) -> None:
    doc_id = _doc_id(F.GENERAL_CHANNEL, F.EDITED_REPLY_ROOT_TS)
    edit_day = "2024-03-06"
    default = _reader(crafted).read_days(F.GENERAL_CHANNEL, [edit_day])
    assert doc_id not in {d.id for d in default.documents}
    rescan = _reader(crafted, rescan_thread_replies=True).read_days(F.GENERAL_CHANNEL, [edit_day])
    doc = next(d for d in rescan.documents if d.id == doc_id)
    assert doc.version == float(F.REPLY_EDIT_TS) and F.EDITED_REPLY_TEXT.split(" (")[0] in doc.text


def test_single_thread_reads_keep_the_channel_acl(crafted: SlackEmulator) -> None:
    # Reconciliation rebuilds threads after discovery listed the channels (without their members).
    reader = _reader(crafted)
    reader.discover_channels()
    shared = reader.thread_document(F.SHARED_CHANNEL, F.SHARED_ROOT_TS)
    private = reader.thread_document(F.PRIVATE_CHANNEL, F.PRIVATE_THREAD_ROOT_TS)
    assert shared is not None and shared.acl.users == (F.EXTERNAL_USER,)
    assert private is not None and set(private.acl.users) == {F.ALICE, F.CAROL, F.BOT_USER}
    reader.thread_document(F.SHARED_CHANNEL, F.SHARED_EXTERNAL_TS)
    assert len(crafted.calls("conversations.members")) == 2  # once per channel, not per thread


def test_request_sequence_of_a_channel_day(crafted: SlackEmulator) -> None:
    _reader(crafted).read_days(F.GENERAL_CHANNEL, ["2024-03-11"])
    methods = [r.method for r in crafted.requests]
    assert methods[:2] == ["conversations.info", "auth.test"]
    assert set(methods) == {
        "conversations.info",
        "auth.test",
        "conversations.history",
        "conversations.replies",
        "users.list",
    }
    history = crafted.calls("conversations.history")
    assert len(history) == 1
    assert history[0].params == {
        "channel": F.GENERAL_CHANNEL,
        "oldest": "1707523200.000000",  # 2024-02-10: 30 days of lookback before 2024-03-11
        "latest": "1710201600.000000",  # 2024-03-12 00:00
        "inclusive": "1",
        "limit": "200",
    }
    # Only the threads with replies on that day are read whole.
    assert [r.params["ts"] for r in crafted.calls("conversations.replies")] == [F.LATE_REPLY_ROOT_TS]


@pytest.mark.parametrize(
    "faults",
    [
        [("429", "conversations.history", 2), ("429", "conversations.replies", 1)],
        [("500", "conversations.replies", 1), ("503", "users.list", 1)],
        [("drop", "conversations.history", 1), ("drop", "conversations.info", 1)],
    ],
)
def test_faults_are_retried_to_the_fault_free_result(crafted: SlackEmulator, faults) -> None:
    clean = _reader(crafted).read_days(F.GENERAL_CHANNEL, MARCH)
    for kind, method, count in faults:
        crafted.inject(kind, method=method, count=count, retry_after=0)
    reader = _reader(crafted)
    faulty = reader.read_days(F.GENERAL_CHANNEL, MARCH)
    assert faulty.documents == clean.documents
    assert reader.stats.total_retries == sum(c for _, _, c in faults)


# --- errors -------------------------------------------------------------------------------------
def test_access_errors_name_the_channel_and_the_fix(crafted: SlackEmulator) -> None:
    reader = _reader(crafted)
    reader.discover_channels()
    with pytest.raises(SlackAccessError, match=r"not_in_channel.*#watercooler \(C0NOJOIN01\).*invite"):
        reader.read_days(F.NOJOIN_CHANNEL, ["2024-03-06"])
    with pytest.raises(SlackAccessError, match=r"channel_not_found.*G0HIDDEN01.*invite the bot"):
        reader.read_days(F.HIDDEN_CHANNEL, ["2024-03-03"])
    crafted.workspace.scopes.discard("groups:history")
    with pytest.raises(SlackAccessError, match=r"missing_scope.*groups:history.*#security"):
        reader.read_days(F.PRIVATE_CHANNEL, ["2024-03-02"])
    bad = SlackApiReader(build_web_client("xoxb-wrong-secret", crafted.base_url))
    with pytest.raises(SlackAccessError, match=r"invalid_auth.*SLACK_BOT_TOKEN") as info:
        bad.discover_channels()
    assert "xoxb-wrong-secret" not in str(info.value)


def test_discovery_filters() -> None:
    with SlackEmulator(F.crafted_workspace()) as emu:
        names = lambda **s: sorted(c.name for c in _reader(emu, **s).discover_channels())  # noqa: E731
        not_member = lambda **s: [c.name for c in _reader(emu, **s).discover().not_member]  # noqa: E731
        assert names() == ["general", "partner-shared", "security"] and not_member() == ["watercooler"]
        assert names(include_archived=True) == ["general", "old-project", "partner-shared", "security"]
        assert names(include_private=False) == ["general", "partner-shared"]
        assert names(channel_allow=("gen.*", "security")) == ["general", "security"]
        assert names(channel_deny=("#watercooler", "partner-.*")) == ["general", "security"]
        # Filters apply first: a denied channel is not reported as one the bot should be invited to.
        assert not_member(channel_deny=("#watercooler",)) == [] and not_member(channel_allow=("general",)) == []


# --- Dagster ------------------------------------------------------------------------------------
def test_live_definitions_load_only_with_a_token(monkeypatch) -> None:
    from rag_pipeline.defs.builders import build_definitions

    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    offline = build_definitions(settings_for())
    assert offline.resolve_asset_graph().has(dg.AssetKey("slack_threads"))
    assert not offline.resolve_asset_graph().has(dg.AssetKey("slack_reconciliation"))
    assert not offline.sensors or all(s.name != "slack_channel_discovery_sensor" for s in offline.sensors)
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    live = build_definitions(settings_for())
    dg.Definitions.validate_loadable(live)
    graph = live.resolve_asset_graph()
    assert graph.get(dg.AssetKey("slack_reconciliation")).pools == {"qdrant"}
    assert live.resolve_job_def("slack_reconciliation_job") is not None
    assert live.resolve_schedule_def("slack_reconciliation_schedule").cron_schedule == "0 3 * * *"
    assert live.resolve_sensor_def("slack_channel_discovery_sensor") is not None
    # The token stays an environment variable in the resource config, never a literal.
    assert live.resources["slack_source"] is live.resources["slack"]


def _live_resources(data_dir: Path, emu: SlackEmulator, **overrides) -> dict:
    res = resources(data_dir, live=False)
    slack = SlackResource(token=TOKEN, base_url=emu.base_url, **overrides)
    res["slack"] = res["slack_source"] = slack
    return res


def _store(data_dir: Path) -> EdgeVectorStore:
    return EdgeVectorStore(data_dir / "qdrant", CollectionNames.with_prefix("rag"))


def test_discovery_sensor_adds_channels_and_leaves_their_runs_to_the_sync_sensor(
    crafted: SlackEmulator, tmp_path: Path
) -> None:
    with dg.instance_for_test() as instance:
        res = _live_resources(tmp_path, crafted, channel_deny=["watercooler"])
        ctx = dg.build_sensor_context(instance=instance, resources={"slack": res["slack"]})
        result = slack_channel_discovery_sensor(ctx)
        added = result.dynamic_partitions_requests[0].partition_keys
        assert sorted(added) == sorted([F.GENERAL_CHANNEL, F.SHARED_CHANNEL, F.PRIVATE_CHANNEL])
        assert not result.run_requests  # slack_sync_sensor requests their initial history
        instance.add_dynamic_partitions("slack_channels", added)
        again = slack_channel_discovery_sensor(
            dg.build_sensor_context(instance=instance, resources={"slack": res["slack"]})
        )
        assert not again.run_requests and not again.dynamic_partitions_requests


def test_materialize_partitions_then_reconcile_deletions(crafted: SlackEmulator, tmp_path: Path) -> None:
    ws = crafted.workspace
    res = _live_resources(tmp_path, crafted)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("slack_channels", [F.GENERAL_CHANNEL])
        for day in ("2024-03-01", "2024-03-04", "2024-03-05", "2024-03-11"):
            result = dg.materialize(
                CHAIN, instance=instance, resources=res, **cell("slack_threads", F.GENERAL_CHANNEL, day)
            )
            assert result.success
        raw = result.asset_materializations_for_node("slack_threads")[0].metadata
        assert TOKEN not in json.dumps({k: str(v.value) for k, v in raw.items()})
        assert raw["documents"].value >= 1 and raw["api_calls"].value > 0
        assert raw["api_calls_by_method"].value["conversations.history"] == 1
        late_thread = _doc_id(F.GENERAL_CHANNEL, F.LATE_REPLY_ROOT_TS)
        plain_root = _doc_id(F.GENERAL_CHANNEL, F.MORNING_ROOT_TSS[3])  # 03-04, no replies
        tomb_thread = _doc_id(F.GENERAL_CHANNEL, F.TOMBSTONE_ROOT_TS)
        broadcast_thread = _doc_id(F.GENERAL_CHANNEL, F.BROADCAST_ROOT_TS)
        with _store(tmp_path) as store:
            refs = store.document_points(store.names.parents, [broadcast_thread])
            assert any(
                "Fine by me" in h.payload["text"] for h in store.retrieve(store.names.parents, [r.id for r in refs])
            )
            before = store.indexed_documents(SearchFilter(containers=(F.GENERAL_CHANNEL,)))
        assert {late_thread, plain_root, tomb_thread, broadcast_thread} <= set(before)

        ws.delete(F.GENERAL_CHANNEL, F.MORNING_ROOT_TSS[3])  # a root without replies: gone
        ws.delete(F.GENERAL_CHANNEL, F.BROADCAST_PLAIN_REPLY_TS)  # a reply: the thread changes
        for reply in F.TOMBSTONE_REPLY_TSS:  # the tombstone's last replies: the tombstone goes too
            ws.delete(F.GENERAL_CHANNEL, reply)
        rec = dg.materialize(
            [slack_reconciliation],
            instance=instance,
            resources=res,
            run_config={
                "ops": {"slack_reconciliation": {"config": {"channels": [F.GENERAL_CHANNEL], "lookback_days": 100_000}}}
            },
        )
        assert rec.success
        meta = {k: v.value for k, v in rec.asset_materializations_for_node("slack_reconciliation")[0].metadata.items()}
        assert meta["documents_removed"] == 2 and meta["documents_rewritten"] == 1
        with _store(tmp_path) as store:
            after = store.indexed_documents(SearchFilter(containers=(F.GENERAL_CHANNEL,)))
            refs = store.document_points(store.names.parents, [broadcast_thread])
            texts = [h.payload["text"] for h in store.retrieve(store.names.parents, [r.id for r in refs])]
        assert texts and not any("Fine by me" in t for t in texts)
        assert plain_root not in after and tomb_thread not in after
        assert late_thread in after and after[late_thread] == before[late_thread]
        assert after[broadcast_thread].content_hash != before[broadcast_thread].content_hash
        assert after[broadcast_thread].version > before[broadcast_thread].version

        # A re-run of the broadcast thread's old partition (older version) does not undo the rewrite.
        dg.materialize(
            CHAIN, instance=instance, resources=res, **cell("slack_threads", F.GENERAL_CHANNEL, "2024-03-04")
        )
        with _store(tmp_path) as store:
            final = store.indexed_documents(SearchFilter(containers=(F.GENERAL_CHANNEL,)))
        assert final[broadcast_thread] == after[broadcast_thread]


def test_sync_command_json_and_one_failing_channel(crafted: SlackEmulator, tmp_path: Path, monkeypatch, capsys) -> None:
    from rag_pipeline.cli import main

    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("SLACK_API_BASE_URL", crafted.base_url)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    code = main(
        ["sync", "--source", "slack", "--start", "2024-03-01", "--end", "2024-03-12", "--data-dir", str(tmp_path),
         "--channel", "general", "--channel", "watercooler", "--json"]
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # watercooler cannot be read ...
    assert set(out["failed"]) == {"watercooler"} and "not_in_channel" in out["failed"]["watercooler"]
    assert out["containers"] == ["general", "watercooler"]
    general = {d.id for d in _reader(crafted).read_days(F.GENERAL_CHANNEL, MARCH).documents}
    assert out["documents"] == len(general) and out["threads_updated"] == len(general)  # ... general is complete
    assert out["documents_removed"] == 0 and out["api_calls"] > 0 and out["retries"] == 0
    with _store(tmp_path) as store:
        assert set(store.indexed_documents(SearchFilter(containers=(F.GENERAL_CHANNEL,)))) == general
    assert out["steps_skipped"] == {}

    # A targeted sync's leaner shape: what it leaves out is said in --json and on stderr.
    lean = main(
        ["sync", "--source", "slack", "--start", "2024-03-01", "--end", "2024-03-12", "--data-dir", str(tmp_path),
         "--channel", "general", "--no-directory", "--no-reconcile", "--json"]
    )  # fmt: skip
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert lean == 0 and out["directory"] == {"skipped": "--no-directory"}
    assert set(out["steps_skipped"]) == {"--no-directory", "--no-reconcile"}
    assert "not done (--no-directory): the principal directory was not refreshed" in captured.err
    assert "not done (--no-reconcile)" in captured.err

    missing = main(
        ["sync", "--source", "slack", "--start", "2024-03-01", "--data-dir", str(tmp_path), "--channel", "nope"]
    )
    assert missing == 2 and "nope" in capsys.readouterr().err
