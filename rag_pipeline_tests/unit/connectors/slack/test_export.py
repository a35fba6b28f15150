"""The Slack export reader on crafted edge cases: threads, tombstones, broadcasts and noise, zip = folder, bad
records reported, a missing export named; the bundled export reads cleanly."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.sources.problems import SourceError
from rag_pipeline_tests.kit.data import D1, D2, TEAM, ts


def _by_id(docs):
    return {d.id: d for d in docs}


def test_slack_threads_tombstones_broadcasts_and_noise(slack_export: Path) -> None:
    read = SlackExportReader(slack_export, TEAM, "acme.slack.com").read()
    assert read.problems == []
    docs = _by_id(read.documents)
    root = ts(D1 + 100)
    thread = docs[f"slack:{TEAM}:C0PUB:{root}"]
    # Tombstoned root: the thread survives with its replies only; the broadcast appears once.
    assert thread.text.splitlines() == [
        "Alice A: try the docs (https://help.ubuntu.com) & ask @Bobby",
        "Bobby: it worked, see #general",
    ]
    assert thread.metadata["root_deleted"] is True
    assert thread.version == pytest.approx(D1 + 300)
    assert thread.day == "2024-03-01"
    assert thread.url == f"https://acme.slack.com/archives/C0PUB/p{root.replace('.', '')}"
    assert thread.acl.groups == (f"slack:{TEAM}:members",) and thread.acl.users == ()
    # A message without replies is a thread of one; clock times are not mistaken for emoji.
    single = docs[f"slack:{TEAM}:C0PUB:{ts(D1 + 500)}"]
    assert single.text == "Bobby: standalone question about grub at 10:30:45"
    # Joins and bot messages are dropped entirely.
    assert not any("joined" in d.text or "deploy finished" in d.text for d in read.documents)
    # Edits move the version (and the partition day) to the edit time.
    edited = docs[f"slack:{TEAM}:C0PUB:{ts(D2 + 50)}"]
    assert edited.version == pytest.approx(D2 + 900)
    # Private channel: readable by its members only.
    private = docs[f"slack:{TEAM}:G0PRIV:{ts(D1 + 700)}"]
    assert private.acl.users == ("U1", "U3") and private.acl.groups == ()
    assert private.acl.admits("U3") and not private.acl.admits("U2", {f"slack:{TEAM}:members"})
    assert len(docs) == 4


def test_slack_zip_equals_directory(slack_export: Path, tmp_path: Path) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for file in slack_export.rglob("*.json"):
            zf.write(file, f"My Workspace Export/{file.relative_to(slack_export)}")
    from_dir = SlackExportReader(slack_export, TEAM).read().documents
    from_zip = SlackExportReader(archive, TEAM).read().documents
    assert sorted(d.model_dump_json() for d in from_zip) == sorted(d.model_dump_json() for d in from_dir)


def test_slack_bad_records_are_reported_not_fatal(slack_export: Path) -> None:
    day = slack_export / "general" / "2024-03-01.json"
    messages = json.loads(day.read_text())
    messages.insert(0, {"type": "message", "text": "no ts here"})
    day.write_text(json.dumps(messages))
    (slack_export / "general" / "2024-03-03.json").write_text("{not json")
    read = SlackExportReader(slack_export, TEAM).read()
    assert len(read.documents) == 4
    reasons = sorted(str(p) for p in read.problems)
    assert len(reasons) == 2
    assert any("2024-03-01.json[0]" in r and "ts" in r for r in reasons)
    assert any("2024-03-03.json" in r and "JSON" in r for r in reasons)


def test_slack_missing_export_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not_here"):
        SlackExportReader(tmp_path / "not_here", TEAM)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceError, match=r"channels\.json"):
        SlackExportReader(empty, TEAM)


def test_bundled_data_reads_cleanly() -> None:
    from rag_pipeline.connectors.slack import settings as slack_settings

    slack = SlackExportReader(slack_settings.BUNDLED_SLACK_EXPORT, slack_settings.BUNDLED_SLACK_TEAM).read()
    assert slack.problems == [] and len(slack.documents) > 500
    assert not any("This message was deleted" in d.text for d in slack.documents)
