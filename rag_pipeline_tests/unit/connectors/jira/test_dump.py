"""The Jira dump reader on crafted edge cases: wiki and ADF bodies, links, security levels, empty fields, an
unsupported body named by its issue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_pipeline.connectors.jira.dump import JiraDumpReader, issue_to_document
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump


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
