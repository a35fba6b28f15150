"""Restricted Jira comments in the dump reader: each its own document under the issue's readers and its role or
group, listed by the issue (its family), kept only with the copy of the issue that was kept."""

from __future__ import annotations

from pathlib import Path

from rag_pipeline.connectors.jira.dump import (
    JiraDumpReader,
    issue_of,
    issue_to_documents,
    project_group,
    role_group,
    with_family_acl,
)
from rag_pipeline.sources.document import Acl
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump

SITE = "jira.family.test"


def _comment(comment_id: str, body: str, visibility: dict | None = None) -> dict:
    found = {"id": comment_id, "author": {"displayName": "Lee"}, "created": "2024-03-01T09:00:00.000+0000",
             "body": body}  # fmt: skip
    return {**found, "visibility": visibility} if visibility else found


def test_the_dump_reader_keeps_a_family_with_the_copy_of_its_issue(tmp_path: Path) -> None:
    role = {"type": "role", "value": "Developers"}
    older = jira_issue("1", "OPS-1", "2024-03-02T10:00:00.000+0000", summary="Upgrade",
                       comments=[_comment("10", "open note"), _comment("11", "old secret", role)])  # fmt: skip
    newer = jira_issue("1", "OPS-1", "2024-03-03T10:00:00.000+0000", summary="Upgrade",
                       comments=[_comment("10", "open note"), _comment("12", "new secret", role),
                                 _comment("13", "no value", {"type": "role"}),
                                 _comment("14", "unknown kind", {"type": "team", "value": "x"})])  # fmt: skip
    dump = write_jira_dump(tmp_path / "issues.jsonl.gz", [older, newer])
    read = JiraDumpReader(dump, SITE).read()
    docs = {d.id: d for d in read.documents}
    issue = docs[f"jira:{SITE}:1"]
    # The newer copy wins, and the old copy's comment goes with it: a family is one version.
    assert sorted(docs) == [f"jira:{SITE}:1", f"jira:{SITE}:1:comment-12"]
    assert issue.metadata["family"] == [f"jira:{SITE}:1:comment-12"]
    assert issue.metadata["restricted_comments"] == 1 and issue.metadata["restricted_comments_dropped"] == 2
    assert "secret" not in issue.text and "open note" in issue.text
    comment = docs[f"jira:{SITE}:1:comment-12"]
    assert comment.acl == Acl(
        groups=(project_group(SITE, "OPS"),), restricted_to=(role_group(SITE, "OPS", "Developers"),)
    )
    assert comment.version == issue.version and comment.day == issue.day and issue_of(comment.id) == issue.id
    assert read.problems  # the duplicate issue id is reported as before


def test_a_new_acl_for_the_family_keeps_each_comments_restriction() -> None:
    role = role_group(SITE, "OPS", "Developers")

    restricted = _comment("20", "x", {"type": "role", "value": "Developers"})
    issue = jira_issue("2", "OPS-2", "2024-03-02T10:00:00.000+0000", comments=[restricted])
    family = issue_to_documents(issue, SITE)
    widened = with_family_acl(family, Acl(groups=("p", "g")))
    assert widened[0].acl == Acl(groups=("p", "g")) and widened[1].acl == Acl(groups=("p", "g"), restricted_to=(role,))
    assert with_family_acl(family, Acl())[1].acl == Acl(restricted_to=(role,))  # readable by nobody
