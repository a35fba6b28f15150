"""Slack export and Jira dump readers on crafted edge cases."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from rag_pipeline.connectors.jira.dump import JiraDumpReader, issue_to_document
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.sources.problems import SourceError
from rag_pipeline_tests.kit.data import D1, D2, TEAM, jira_issue, ts, write_jira_dump


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


def test_jira_wiki_adf_links_security_and_empty(tmp_path: Path) -> None:
    adf = {
        "type": "doc",
        "version": 1,
        "content": [
            {
                "type": "paragraph",
                "content": [
                    {"type": "text", "text": "Crash on "},
                    {"type": "text", "text": "start", "marks": [{"type": "strong"}]},
                ],
            },
            {
                "type": "codeBlock",
                "attrs": {"language": "js"},
                "content": [{"type": "text", "text": "Ti.API.info(1);"}],
            },
        ],
    }
    wiki = "h2. Steps\n*bold* see [the docs|http://x.io] {code}var *a* = [1];{code}"
    issues = [
        jira_issue(
            "100",
            "TIMOB-1",
            "2024-03-01T23:59:59.999+0000",
            description=wiki,
            comments=[
                {"author": {"displayName": "Ann"}, "created": "2024-03-01T10:00:00.000+0000", "body": adf},
                {"author": {"displayName": "Bo"}, "created": "2024-03-01T11:00:00.000+0000"},
            ],
            issuelinks=[
                {
                    "type": {"name": "Duplicate", "inward": "is duplicated by", "outward": "duplicates"},
                    "outwardIssue": {"id": "7", "key": "TIMOB-0"},
                }
            ],
        ),
        jira_issue("101", "TIMOB-2", "2024-03-02T00:00:00.000+0000", security={"id": "55", "name": "Internal"}),
    ]
    dump = write_jira_dump(tmp_path / "dump.jsonl.gz", issues, extra_lines=["{broken", json.dumps({"id": "9"})])
    read = JiraDumpReader(dump, "jira.example.com").read()
    assert len(read.problems) == 2 and all("dump.jsonl.gz:" in str(p) for p in read.problems)
    first, second = read.documents
    assert first.id == "jira:jira.example.com:100" and first.container == "TIMOB"
    assert "## Steps" in first.text and "**bold**" in first.text and "the docs (http://x.io)" in first.text
    assert "var *a* = [1];" in first.text  # code is left exactly as written
    assert "Ann (2024-03-01): Crash on **start**" in first.text and "```js\nTi.API.info(1);\n```" in first.text
    assert first.metadata["links"] == [
        {"type": "Duplicate", "direction": "outward", "relation": "duplicates", "key": "TIMOB-0", "id": "7"}
    ]
    assert first.metadata["comment_count"] == 1  # the comment without a body is skipped, not fatal
    assert first.acl.groups == ("jira:jira.example.com:project:TIMOB",)
    # 23:59:59.999 and 00:00:00 land on different days.
    assert (first.day, second.day) == ("2024-03-01", "2024-03-02")
    # Empty issue: just its key and summary; security level restricts the ACL.
    assert second.text == "TIMOB-2: Summary of TIMOB-2"
    assert second.acl.groups == ("jira:jira.example.com:security:55",)


def test_jira_unsupported_body_names_the_issue(tmp_path: Path) -> None:
    issue = jira_issue("5", "AC-5", "2024-03-01T00:00:00.000+0000", description=["not", "a", "body"])
    with pytest.raises(TypeError, match="list"):
        issue_to_document(issue, "s")
    dump = write_jira_dump(tmp_path / "d.jsonl.gz", [issue, jira_issue("6", "AC-6", "2024-03-01T00:00:00.000+0000")])
    read = JiraDumpReader(dump, "s").read()
    assert [d.metadata["key"] for d in read.documents] == ["AC-6"]
    assert "(AC-5)" in str(read.problems[0])


def test_bundled_data_reads_cleanly() -> None:
    from rag_pipeline.connectors.slack import settings as slack_settings

    slack = SlackExportReader(slack_settings.BUNDLED_SLACK_EXPORT, slack_settings.BUNDLED_SLACK_TEAM).read()
    assert slack.problems == [] and len(slack.documents) > 500
    assert not any("This message was deleted" in d.text for d in slack.documents)
