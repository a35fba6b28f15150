"""A team's own Slack export, Jira dump and Jira CSV export, indexed with ``rag-pipeline index`` through the real
partitioned assets, each under its own identity: from the data where it names one, from the flags otherwise, an
error naming the flag where neither says, and one identity per source per data folder."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from rag_pipeline.cli import main
from rag_pipeline.connectors.jira.identity import jira_sites
from rag_pipeline.connectors.slack.identity import resolve_slack_identity, slack_clues
from rag_pipeline.sources.identity import IdentityError
from rag_pipeline_tests.kit.data import D1, basic_days, jira_issue, ts, write_jira_dump, write_slack_export
from rag_pipeline_tests.kit.paths import FIXTURES_DIR

FIXTURES = FIXTURES_DIR / "jira_csv"


def _acme_export(root: Path, team: str = "T0ACME", host: str = "acme.slack.com") -> Path:
    """The crafted export as a real one looks: members carry the workspace's team id, messages their poster's
    team, a shared file its permalink on the workspace's host; one guest from another workspace."""
    export = write_slack_export(root, basic_days())
    users = json.loads((export / "users.json").read_text())
    for user in users:
        user["team_id"] = team
    users.append({"id": "U9GUEST", "name": "guest", "team_id": "T0GUEST", "is_stranger": True})
    (export / "users.json").write_text(json.dumps(users))
    day = export / "general" / "2024-03-01.json"
    messages = json.loads(day.read_text())
    for message in messages:
        message["team"] = team
    messages.append(
        {
            "type": "message",
            "user": "U1",
            "team": team,
            "text": "the quarterly capacity plan for the blue cluster",
            "ts": ts(D1 + 5000),
            "files": [{"id": "F1", "permalink": f"https://{host}/files/U1/F1/plan.pdf"}],
        }
    )
    day.write_text(json.dumps(messages))
    return export


def _index(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["index", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _search(capsys: pytest.CaptureFixture[str], data: Path, query: str, group: str) -> list[dict]:
    assert main(["search", query, "--groups", group, "--json", "--data-dir", str(data)]) == 0
    return json.loads(capsys.readouterr().out)["results"]


def test_detection_reads_members_over_guests_and_the_workspace_host(tmp_path: Path) -> None:
    export = _acme_export(tmp_path / "export")
    clues = slack_clues(export)
    assert clues.user_teams == {"T0ACME": 3, "T0GUEST": 1}
    assert resolve_slack_identity(export).team_id == "T0ACME"
    assert resolve_slack_identity(export).domain == "acme.slack.com"
    # A flag that contradicts the data is refused, naming both.
    with pytest.raises(IdentityError, match=r"T0ACME.*--slack-team/SLACK_TEAM_ID says T0OTHER"):
        resolve_slack_identity(export, team_id="T0OTHER")
    # Two workspaces in equal measure: the data cannot say which, the flag must.
    users = json.loads((export / "users.json").read_text())
    (export / "users.json").write_text(json.dumps([*users, *({**u, "team_id": "T0TWIN"} for u in users)]))
    with pytest.raises(IdentityError, match=r"several workspace team ids.*pass --slack-team"):
        resolve_slack_identity(export)


@pytest.mark.parametrize("packed", [False, True], ids=["folder", "zip"])
def test_an_own_slack_export_is_indexed_under_its_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], packed: bool
) -> None:
    export = _acme_export(tmp_path / "acme")
    if packed:
        export = Path(shutil.make_archive(str(tmp_path / "acme_export"), "zip", root_dir=export))
    data = tmp_path / "data"
    result = _index(capsys, "--slack-export", str(export), "--data-dir", str(data))
    assert result["identities"] == {"slack": {"team_id": "T0ACME", "domain": "acme.slack.com"}}
    assert set(result["per_source"]) == {"slack"} and result["documents"] >= 2
    hits = _search(capsys, data, "quarterly capacity plan blue cluster", "slack:T0ACME:members")
    assert hits, "a member of the workspace finds its threads"
    top = hits[0]
    assert top["document_id"].startswith("slack:T0ACME:C0PUB:")
    assert top["url"].startswith("https://acme.slack.com/archives/C0PUB/p")
    # The ACL group is the workspace's own: the bundled workspace's members read nothing of it.
    assert _search(capsys, data, "quarterly capacity plan blue cluster", "slack:T0UBUNTU:members") == []


def test_an_export_without_identity_needs_the_flag_and_the_folder_keeps_one_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anonymous = write_slack_export(tmp_path / "anonymous", basic_days())
    data = tmp_path / "data"
    assert main(["index", "--slack-export", str(anonymous), "--data-dir", str(data)]) == 2
    error = capsys.readouterr().err
    assert f"Slack export {anonymous} does not say which team id" in error and "--slack-team" in error
    # With the flag it is indexed under that workspace; without a host its threads get no links (and say so).
    assert main(["index", "--slack-export", str(anonymous), "--slack-team", "T0ANON", "--data-dir", str(data)]) == 0
    captured = capsys.readouterr()
    out = captured.out
    # Off a terminal, the embedding step's progress is a log line with its rate (the bar on a terminal).
    assert re.search(r"slack embedding \(chunks\): (\d+)/\1 \(100%\), [\d.]+/s", captured.err), captured.err
    assert "Slack workspace T0ANON, no links (no workspace host found; pass --slack-domain)" in out
    hits = _search(capsys, data, "thread", "slack:T0ANON:members")
    assert hits and all(h["url"] is None for h in hits)
    # Another workspace into the same data folder is refused before anything is written.
    acme = _acme_export(tmp_path / "acme")
    assert main(["index", "--slack-export", str(acme), "--data-dir", str(data)]) == 2
    error = capsys.readouterr().err
    assert "holds slack from workspace T0ANON, not workspace T0ACME (acme.slack.com)" in error
    assert "--data-dir" in error
    assert _search(capsys, data, "quarterly capacity plan", "slack:T0ACME:members") == []


def test_a_jira_dump_names_its_site_in_self_urls_and_without_them_needs_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    issues = [
        jira_issue("101", "OPS-1", "2024-03-01T10:00:00.000+0000", "The backup job fails on the replica"),
        jira_issue("102", "OPS-2", "2024-03-02T10:00:00.000+0000", "Certificate rotation for the gateway"),
    ]
    for issue in issues:
        issue["self"] = f"https://jira.acme.test/rest/api/2/issue/{issue['id']}"
    dump = write_jira_dump(tmp_path / "acme.jsonl.gz", issues)
    assert jira_sites(dump) == {"jira.acme.test": 2}
    data = tmp_path / "data"
    result = _index(capsys, "--jira-dump", str(dump), "--data-dir", str(data))
    assert result["identities"] == {"jira": {"site": "jira.acme.test"}}
    hits = _search(capsys, data, "backup job replica", "jira:jira.acme.test:project:OPS")
    assert hits[0]["document_id"] == "jira:jira.acme.test:101"
    assert hits[0]["url"] == "https://jira.acme.test/browse/OPS-1"

    bare = write_jira_dump(tmp_path / "bare.jsonl.gz", [jira_issue("7", "X-7", "2024-03-01T10:00:00.000+0000")])
    assert main(["index", "--jira-dump", str(bare), "--data-dir", str(tmp_path / "other")]) == 2
    error = capsys.readouterr().err
    assert "does not say which site it is from; pass --jira-site" in error and "JIRA_SITE" in error


def test_jira_csv_export_is_indexed_under_the_site_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = FIXTURES / "appcelerator_ac.csv"
    data = tmp_path / "data"
    # The CSV names no site: the flag is required.
    assert main(["index", "--jira-csv", str(csv), "--data-dir", str(data)]) == 2
    assert "--jira-site" in capsys.readouterr().err
    # This export shows seconds: the instance's display format is given.
    fmt = "%d/%b/%y %H:%M:%S"
    argv = ["--jira-csv", str(csv), "--jira-site", "jira.example.org", "--jira-date-format", fmt]
    result = _index(capsys, *argv, "--data-dir", str(data))
    assert result["identities"] == {"jira": {"site": "jira.example.org"}}
    assert result["per_source"]["jira"]["documents"] == 3
    hits = _search(capsys, data, "node downloads missing from CLI page", "jira:jira.example.org:project:AC")
    assert hits[0]["title"].startswith("AC-23") and hits[0]["document_id"] == "jira:jira.example.org:143859"
    # A dump and a CSV at once is one Jira source too many.
    assert main(["index", "--jira-csv", str(csv), "--jira-dump", str(csv), "--data-dir", str(data)]) == 2
    assert "not both" in capsys.readouterr().err
