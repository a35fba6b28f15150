"""The access audit (issue 47, part 3): after a directory sync, the ``access_audit`` asset records who gained or
lost access to what and how many indexed documents that is; its check fails on a mass change; ``rag-pipeline
audit`` prints the same rows. Real Dagster runs of the real directory asset over a Slack export the emulator's
workspace writes, with an embedded index of its threads (4-d stand-in vectors: an ACL needs no dense model)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.connectors.slack.threads import workspace_group
from rag_pipeline.defs.chain.resources import QdrantResource
from rag_pipeline.defs.directory import (
    MASS_CHANGE_CHECK,
    DirectoryResource,
    build_access_audit_asset,
    build_directory_asset,
)
from rag_pipeline.defs.slack.resources import SlackExportResource
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.index_info import claim_dense_model
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.slack_index import UNLOADABLE_MODEL, index_threads, read_threads

MEMBERS = workspace_group(F.CRAFTED_TEAM)


@pytest.fixture
def emu():
    with SlackEmulator(F.crafted_workspace()) as emulator:
        yield emulator


def _data(emu: SlackEmulator, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    store = EdgeVectorStore(data / "qdrant")
    store.create_collections(4)
    index_threads(store, read_threads(emu, F.GENERAL_CHANNEL, F.SHARED_CHANNEL, F.PRIVATE_CHANNEL))
    claim_dense_model(store, UNLOADABLE_MODEL)
    store.close()
    return data


def _run(emu: SlackEmulator, data: Path, instance: dg.DagsterInstance, threshold: int = 25) -> dict:
    """The workspace's export now, through the directory asset and then the audit, in one Dagster instance."""
    emu.workspace.write_export(data / "export")
    resources = {
        "slack_source": SlackExportResource(path=str(data / "export"), team_id=F.CRAFTED_TEAM),
        "directory": DirectoryResource(path=str(data / "directory.sqlite")),
        "qdrant": QdrantResource(path=str(data / "qdrant")),
    }
    assets = [build_directory_asset("slack"), build_access_audit_asset(["slack"], threshold)]
    result = dg.materialize(assets, resources=resources, instance=instance)
    assert result.success
    metadata = {k: v.value for k, v in result.asset_materializations_for_node("access_audit")[0].metadata.items()}
    (check,) = [c for c in result.get_asset_check_evaluations() if c.check_name == MASS_CHANGE_CHECK]
    return {"metadata": metadata, "check": check}


def test_the_audit_records_who_gained_and_lost_access_with_document_counts(
    emu: SlackEmulator, tmp_path: Path, monkeypatch, capsys
) -> None:
    data = _data(emu, tmp_path)
    with dg.instance_for_test() as instance:
        first = _run(emu, data, instance)
        # A first sync is the baseline: no change recorded, nothing to review.
        assert first["metadata"]["changes"] == 0 and first["check"].passed

        with emu.workspace.lock:
            emu.workspace.channel(F.PRIVATE_CHANNEL).members.remove(F.CAROL)
            emu.workspace.channel(F.PRIVATE_CHANNEL).members.append(F.DAVE)
            next(u for u in emu.workspace.users if u["id"] == F.BOB)["deleted"] = True
        second = _run(emu, data, instance)
        rows = DirectoryStore(data / "directory.sqlite").access_changes()
        changes = {(r.account_id, r.change, r.grant_id) for r in rows}
        assert (F.CAROL, "lost", f"channel:{F.PRIVATE_CHANNEL}") in changes
        assert (F.DAVE, "gained", f"channel:{F.PRIVATE_CHANNEL}") in changes
        assert (F.BOB, "lost", MEMBERS) in changes
        private_threads = len(read_threads(emu, F.PRIVATE_CHANNEL))
        by_grant = {(r.account_id, r.grant_id): r.documents for r in rows}
        assert by_grant[(F.CAROL, f"channel:{F.PRIVATE_CHANNEL}")] == private_threads
        assert by_grant[(F.BOB, MEMBERS)] == len(read_threads(emu, F.GENERAL_CHANNEL, F.SHARED_CHANNEL))
        metadata = second["metadata"]
        assert metadata["accounts_gained"] == 1 and metadata["accounts_lost"] == 2
        assert metadata["documents_gained"] == private_threads
        assert "#security" in metadata["access_changes"] and "lost" in metadata["access_changes"]
        assert second["check"].passed and second["check"].metadata["accounts_changed"].value == 3

        # Nothing changed since: the next audit starts after the rows it has seen.
        third = _run(emu, data, instance)
        assert third["metadata"]["changes"] == 0

        # Over the threshold: the check fails (an ERROR the notification sensor posts).
        with emu.workspace.lock:
            emu.workspace.channel(F.PRIVATE_CHANNEL).members.append(F.CAROL)
        mass = _run(emu, data, instance, threshold=0)
        assert not mass["check"].passed and mass["check"].severity == dg.AssetCheckSeverity.ERROR

    monkeypatch.setenv("RAG_DATA_DIR", str(data))
    monkeypatch.setenv("RAG_DENSE_MODEL", UNLOADABLE_MODEL)
    from rag_pipeline.cli import main

    assert main(["audit", "--since", "1d", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {(p["account_id"], p["change"]) for p in printed} >= {
        (F.CAROL, "lost"),
        (F.DAVE, "gained"),
        (F.CAROL, "gained"),
    }
    assert all(p["documents"] is not None for p in printed)
    # Counting skipped is said on stderr; the JSON says it per row (documents null).
    with DirectoryStore(data / "directory.sqlite")._connect(write=True) as db:
        db.execute("UPDATE access_changes SET documents = NULL")
    assert main(["audit", "--since", "1d", "--json", "--no-count"]) == 0
    skipped = capsys.readouterr()
    assert all(p["documents"] is None for p in json.loads(skipped.out))
    assert "without a document count (--no-count)" in skipped.err
    assert main(["audit", "--since", "2026-13-01"]) == 2
    assert "--since '2026-13-01'" in capsys.readouterr().err
