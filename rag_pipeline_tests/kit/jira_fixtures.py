"""Sites for the Jira emulator: the bundled dump, a crafted edge-case site, and a synthetic big one.

* :func:`bundled_site` loads projects of the bundled Appcelerator dump (REST v2 issue objects, wiki markup).
* :func:`crafted_site` is small and hand-made: every Jira edge case the incremental sync has to handle (minute and
  timezone boundaries of JQL dates, a security level, an issue to move and one to delete, an ADF description using
  every node type, a 250-comment thread, issue links both ways, a bad body, wiki markup, an archived and an
  invisible project). The module constants name the interesting issues so tests can refer to them.
* :func:`synthetic_site` spreads the bundled issues' texts over many projects and days, for benchmarks.

Every call builds a fresh, independent site.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.jira import settings as jira_settings
from rag_pipeline_tests.kit.emulators.jira_site import JiraSite

# -- bundled dump -----------------------------------------------------------------------------------------------------

BUNDLED_DUMP: Path = jira_settings.BUNDLED_JIRA_DUMP
BUNDLED_PROJECT_COUNTS = {"TIMOB": 2928, "AC": 524, "ALOY": 115, "DAEMON": 32, "MOD": 22}


def bundled_site(projects: tuple[str, ...] | None = ("DAEMON", "MOD"), **kw: Any) -> JiraSite:
    """The bundled dump's issues of ``projects`` (None: all 3,621) as a site, stored as dumped (v2, wiki markup).
    ``kw`` goes to :meth:`JiraSite.from_dump` (``limit_per_project``, ``user_timezone``, ...)."""
    return JiraSite.from_dump(BUNDLED_DUMP, projects=projects, **kw)


# -- crafted site -----------------------------------------------------------------------------------------------------

CRAFTED_TIMEZONE = "America/Los_Angeles"  # the API user's timezone: JQL dates are read in it
CRAFTED_BASE_URL = "https://crafted.atlassian.net"

OPS_PROJECT_ID = "10000"
SEC_PROJECT_ID = "10001"
NEW_PROJECT_ID = "10002"  # the target of the move
OLD_PROJECT_ID = "10003"  # archived
HID_PROJECT_ID = "10004"  # invisible to the API user
OPS_BROWSE_GROUPS = ("jira-users",)
OPS_ROLE_ID = "10002"
OPS_ROLE_NAME = "Developers"
OPS_ROLE_GROUPS = ("ops-devs",)
OPS_ROLE_USERS = ("acc-carol",)
SEC_BROWSE_GROUPS = ("security-team",)
NEW_BROWSE_GROUPS = ("jira-users",)
OLD_BROWSE_GROUPS = ("jira-users",)
HID_BROWSE_GROUPS = ("hr-team",)

ALICE = {"accountId": "acc-alice", "displayName": "Alice Anders", "emailAddress": "alice@example.com"}
BOB = {"accountId": "acc-bob", "displayName": "Bob Brown", "emailAddress": "bob@example.com"}
CAROL = {"accountId": "acc-carol", "displayName": "Carol Chen", "emailAddress": "carol@example.com"}
DAVE = {"accountId": "acc-dave", "displayName": "Dave Diaz", "emailAddress": "dave@example.com"}

# Minute and timezone boundaries (the user is in Los Angeles, UTC-8 in early March 2024).
BOUNDARY_LATE_ID, BOUNDARY_LATE_KEY = "20001", "OPS-1"
BOUNDARY_LATE_UPDATED = "2024-03-04T23:59:59.999+0000"
BOUNDARY_EARLY_ID, BOUNDARY_EARLY_KEY = "20002", "OPS-2"
BOUNDARY_EARLY_UPDATED = "2024-03-05T00:00:00.000+0000"
TZ_TRAP_ID, TZ_TRAP_KEY = "20003", "OPS-3"
TZ_TRAP_UPDATED = "2024-03-05T07:59:30.000+0000"  # 2024-03-04 23:59:30 in Los Angeles
TZ_AFTER_ID, TZ_AFTER_KEY = "20004", "OPS-4"
TZ_AFTER_UPDATED = "2024-03-05T08:00:00.000+0000"  # 2024-03-05 00:00:00 in Los Angeles
# An ADF description using every node type, and an ADF comment.
ADF_ALL_ID, ADF_ALL_KEY = "20005", "OPS-5"
ADF_ALL_UPDATED = "2024-03-06T10:15:00.000+0000"
# A thread longer than any page: 250 comments ("comment number 1" ... "comment number 250").
HUGE_THREAD_ID, HUGE_THREAD_KEY = "20006", "OPS-6"
HUGE_THREAD_COMMENTS = 250
HUGE_THREAD_UPDATED = "2024-03-06T14:00:00.000+0000"  # its last comment
# Linked issues: OPS-7 duplicates OPS-8 (Duplicate), OPS-8 blocks OPS-7 (Blocks); each holds both directions.
LINKED_DUPLICATE_ID, LINKED_DUPLICATE_KEY = "20007", "OPS-7"
LINKED_ORIGINAL_ID, LINKED_ORIGINAL_KEY = "20008", "OPS-8"
LINKED_IDS = (LINKED_DUPLICATE_ID, LINKED_ORIGINAL_ID)
LINKED_KEYS = (LINKED_DUPLICATE_KEY, LINKED_ORIGINAL_KEY)
DUPLICATE_LINK_ID = "30001"
BLOCKS_LINK_ID = "30002"
LINKED_UPDATED = ("2024-03-07T09:00:00.000+0000", "2024-03-07T09:05:00.000+0000")
WIKI_ID, WIKI_KEY = "20009", "OPS-9"
WIKI_UPDATED = "2024-03-08T16:45:00.000+0000"
# Moved by tests: site.move_issue(MOVED_KEY, "NEW", MOVED_NEW_KEY, MOVE_UPDATED).
MOVED_ID, MOVED_KEY = "20010", "OPS-10"
MOVED_UPDATED = "2024-03-09T11:00:00.000+0000"
MOVED_NEW_KEY = "NEW-1"
MOVE_UPDATED = "2024-03-20T10:00:00.000+0000"
# Deleted by tests: site.delete_issue(DELETED_ID).
DELETED_ID, DELETED_KEY = "20011", "OPS-11"
DELETED_UPDATED = "2024-03-10T08:30:00.000+0000"
# A description that is not a body at all (the int 12345): readers must report it, not crash.
BAD_BODY_ID, BAD_BODY_KEY = "20012", "OPS-12"
BAD_BODY_UPDATED = "2024-03-04T12:00:00.000+0000"
BAD_BODY_DESCRIPTION = 12345
SECURE_ID, SECURE_KEY = "20101", "SEC-1"
SECURE_UPDATED = "2024-03-11T13:00:00.000+0000"
SECURITY_LEVEL = {"id": "10100", "name": "Security team"}
ARCHIVED_ISSUE_ID, ARCHIVED_ISSUE_KEY = "20201", "OLD-1"  # in the archived project: never found by JQL
ARCHIVED_ISSUE_UPDATED = "2024-03-02T10:00:00.000+0000"
HIDDEN_ISSUE_ID, HIDDEN_ISSUE_KEY = "20301", "HID-1"  # in the invisible project: never served
HIDDEN_ISSUE_UPDATED = "2024-03-03T10:00:00.000+0000"
HIDDEN_TEXT = "Salary bands for 2024 are in the HR drive"  # must never be served

OPS_ISSUE_KEYS = tuple(f"OPS-{n}" for n in range(1, 13))
SEARCHABLE_ISSUE_IDS = (*(f"200{n:02d}" for n in range(1, 13)), SECURE_ID)  # OPS and SEC issues
# The UTC days of the searchable issues' ``updated`` (before any move or deletion).
CRAFTED_DAYS = (
    "2024-03-04",
    "2024-03-05",
    "2024-03-06",
    "2024-03-07",
    "2024-03-08",
    "2024-03-09",
    "2024-03-10",
    "2024-03-11",
)

WIKI_DESCRIPTION = (
    "h2. Deploy runbook\n"
    "\n"
    "Run the *deploy* step first, see [the wiki|http://x] for details.\n"
    "\n"
    "{code:bash}\n"
    "kubectl rollout restart deploy/api\n"
    "{code}\n"
    "\n"
    "* check the dashboards\n"
    "* notify the on-call channel"
)


def _text(text: str, *marks: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "text", "text": text}
    if marks:
        node["marks"] = list(marks)
    return node


def _para(*content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "paragraph", "content": list(content)}


def _item(*content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "listItem", "content": list(content)}


ADF_ALL_DOC: dict[str, Any] = {
    "type": "doc",
    "version": 1,
    "content": [
        {"type": "heading", "attrs": {"level": 2}, "content": [_text("Login outage")]},
        _para(
            _text("Login fails for "),
            {"type": "mention", "attrs": {"id": "acc-bob", "text": "@Bob Brown", "accessLevel": ""}},
            _text(" since "),
            {"type": "date", "attrs": {"timestamp": "1709596800000"}},  # 2024-03-05
            _text(" "),
            {"type": "emoji", "attrs": {"shortName": ":warning:", "id": "26a0", "text": "⚠️"}},
            _text(" "),
            {"type": "status", "attrs": {"text": "IN PROGRESS", "color": "blue", "localId": "st-1"}},
        ),
        _para(
            _text("strong words", {"type": "strong"}),
            _text(", "),
            _text("emphasis", {"type": "em"}),
            _text(", "),
            _text("auth_proxy.conf", {"type": "code"}),
            _text(", "),
            _text("struck out", {"type": "strike"}),
            _text(", "),
            _text("the runbook", {"type": "link", "attrs": {"href": "https://example.com/runbook"}}),
            {"type": "hardBreak"},
            _text("second line after a hard break"),
        ),
        {
            "type": "bulletList",
            "content": [
                _item(_para(_text("step one"))),
                _item(
                    _para(_text("step two")),
                    {
                        "type": "orderedList",
                        "attrs": {"order": 1},
                        "content": [_item(_para(_text("nested first"))), _item(_para(_text("nested second")))],
                    },
                ),
            ],
        },
        {
            "type": "orderedList",
            "attrs": {"order": 3},
            "content": [_item(_para(_text("third step"))), _item(_para(_text("fourth step")))],
        },
        {"type": "codeBlock", "attrs": {"language": "python"}, "content": [_text("print('hi')\nprint('bye')")]},
        {"type": "blockquote", "content": [_para(_text("quoted customer report"))]},
        {"type": "panel", "attrs": {"panelType": "warning"}, "content": [_para(_text("panel warning text"))]},
        {"type": "rule"},
        {
            "type": "table",
            "attrs": {"isNumberColumnEnabled": False, "layout": "default"},
            "content": [
                {
                    "type": "tableRow",
                    "content": [
                        {"type": "tableHeader", "attrs": {}, "content": [_para(_text("Env"))]},
                        {"type": "tableHeader", "attrs": {}, "content": [_para(_text("Result"))]},
                    ],
                },
                {
                    "type": "tableRow",
                    "content": [
                        {"type": "tableCell", "attrs": {}, "content": [_para(_text("prod"))]},
                        {
                            "type": "tableCell",
                            "attrs": {},
                            "content": [
                                _para(_text("fail")),
                                {
                                    "type": "nestedExpand",
                                    "attrs": {"title": "Stack"},
                                    "content": [_para(_text("nested expand details"))],
                                },
                            ],
                        },
                    ],
                },
            ],
        },
        _para({"type": "inlineCard", "attrs": {"url": f"{CRAFTED_BASE_URL}/browse/OPS-2"}}),
        {"type": "blockCard", "attrs": {"url": "https://example.com/dashboards/login"}},
        {
            "type": "mediaSingle",
            "attrs": {"layout": "center"},
            "content": [
                {
                    "type": "media",
                    "attrs": {"id": "m-1", "type": "file", "collection": "jira-20005", "alt": "screenshot.png"},
                }
            ],
        },
        {
            "type": "mediaGroup",
            "content": [
                {
                    "type": "media",
                    "attrs": {"id": "m-2", "type": "file", "collection": "jira-20005", "filename": "trace.log"},
                }
            ],
        },
        {"type": "expand", "attrs": {"title": "Details"}, "content": [_para(_text("expanded details"))]},
        {
            "type": "decisionList",
            "attrs": {"localId": "dl-1"},
            "content": [
                {
                    "type": "decisionItem",
                    "attrs": {"localId": "di-1", "state": "DECIDED"},
                    "content": [_text("Roll back the auth proxy")],
                }
            ],
        },
        {
            "type": "taskList",
            "attrs": {"localId": "tl-1"},
            "content": [
                {"type": "taskItem", "attrs": {"localId": "ti-1", "state": "DONE"}, "content": [_text("page on-call")]},
                {
                    "type": "taskItem",
                    "attrs": {"localId": "ti-2", "state": "TODO"},
                    "content": [_text("write postmortem")],
                },
            ],
        },
        {"type": "futureWidget", "content": [_text("future text")]},
    ],
}
# Text that the ADF_ALL description holds in its nodes (a reader's plain text should keep each of them).
ADF_ALL_TEXTS = (
    "Login outage",
    "@Bob Brown",
    "IN PROGRESS",
    "strong words",
    "auth_proxy.conf",
    "the runbook",
    "second line after a hard break",
    "nested second",
    "fourth step",
    "print('hi')",
    "quoted customer report",
    "panel warning text",
    "prod",
    "nested expand details",
    "expanded details",
    "Roll back the auth proxy",
    "write postmortem",
    "future text",
)
ADF_COMMENT_DOC: dict[str, Any] = {
    "type": "doc",
    "version": 1,
    "content": [
        _para(
            _text("Rolled back; "),
            {"type": "mention", "attrs": {"id": "acc-alice", "text": "@Alice Anders"}},
            _text(" confirmed that logins work again."),
        )
    ],
}

_ISSUETYPES = {
    "Bug": {"id": "1", "name": "Bug", "subtask": False, "description": "A problem which impairs the product."},
    "Task": {"id": "3", "name": "Task", "subtask": False, "description": "A task that needs to be done."},
    "Improvement": {"id": "4", "name": "Improvement", "subtask": False, "description": "An enhancement."},
}
_CATEGORIES = {
    "new": {"id": 2, "key": "new", "colorName": "blue-gray", "name": "To Do"},
    "indeterminate": {"id": 4, "key": "indeterminate", "colorName": "yellow", "name": "In Progress"},
    "done": {"id": 3, "key": "done", "colorName": "green", "name": "Done"},
}
_STATUSES = {
    "Open": {"id": "1", "name": "Open", "description": "", "statusCategory": _CATEGORIES["new"]},
    "In Progress": {
        "id": "3",
        "name": "In Progress",
        "description": "",
        "statusCategory": _CATEGORIES["indeterminate"],
    },
    "Resolved": {"id": "5", "name": "Resolved", "description": "", "statusCategory": _CATEGORIES["done"]},
    "Closed": {"id": "6", "name": "Closed", "description": "", "statusCategory": _CATEGORIES["done"]},
}
_PRIORITIES = {name: {"id": str(i), "name": name} for i, name in enumerate(("Critical", "Major", "Minor"), start=2)}
_DUPLICATE = {"id": "10002", "name": "Duplicate", "inward": "is duplicated by", "outward": "duplicates"}
_BLOCKS = {"id": "10000", "name": "Blocks", "inward": "is blocked by", "outward": "blocks"}


def _person(person: dict[str, str]) -> dict[str, Any]:
    return {**person, "active": True, "timeZone": CRAFTED_TIMEZONE, "accountType": "atlassian"}


def _comment(comment_id: str, author: dict[str, str], body: Any, created: str) -> dict[str, Any]:
    return {
        "id": comment_id,
        "author": _person(author),
        "body": body,
        "updateAuthor": _person(author),
        "created": created,
        "updated": created,
        "jsdPublic": True,
    }


def _jira_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+0000"


def _issue(
    issue_id: str,
    key: str,
    summary: str,
    *,
    created: str,
    updated: str,
    description: Any,
    comments: list[dict[str, Any]] | None = None,
    issuetype: str = "Bug",
    status: str = "Open",
    priority: str = "Major",
    labels: tuple[str, ...] = (),
    components: tuple[str, ...] = (),
    reporter: dict[str, str] = ALICE,
    assignee: dict[str, str] | None = BOB,
    issuelinks: list[dict[str, Any]] | None = None,
    project_name: str = "",
    **extra: Any,
) -> dict[str, Any]:
    project_key = key.rpartition("-")[0]
    resolved = status in ("Resolved", "Closed")
    comments = comments or []
    fields: dict[str, Any] = {
        "issuetype": _ISSUETYPES[issuetype],
        "project": {"key": project_key, "name": project_name or project_key},
        "resolution": {"id": "1", "name": "Fixed", "description": "A fix is checked in."} if resolved else None,
        "resolutiondate": updated if resolved else None,
        "created": created,
        "updated": updated,
        "priority": _PRIORITIES[priority],
        "labels": list(labels),
        "components": [{"id": str(100 + i), "name": c} for i, c in enumerate(components)],
        "versions": [],
        "fixVersions": [],
        "issuelinks": issuelinks or [],
        "assignee": _person(assignee) if assignee else None,
        "status": _STATUSES[status],
        "description": description,
        "environment": None,
        "attachment": [],
        "summary": summary,
        "creator": _person(reporter),
        "reporter": _person(reporter),
        "subtasks": [],
        "comment": {"comments": comments, "maxResults": len(comments), "total": len(comments), "startAt": 0},
    }
    fields.update(extra)
    return {"id": issue_id, "key": key, "fields": fields}


def _link_ref(issue_id: str, key: str, summary: str) -> dict[str, Any]:
    return {
        "id": issue_id,
        "key": key,
        "fields": {
            "summary": summary,
            "status": _STATUSES["Open"],
            "priority": _PRIORITIES["Major"],
            "issuetype": _ISSUETYPES["Bug"],
        },
    }


def _two_comments(issue_id: str, day: str, first: str, second: str) -> list[dict[str, Any]]:
    base = int(issue_id) * 10
    return [
        _comment(str(base + 1), ALICE, first, f"{day}T10:00:00.000+0000"),
        _comment(str(base + 2), BOB, second, f"{day}T11:30:00.000+0000"),
    ]


def crafted_site(user_timezone: str = CRAFTED_TIMEZONE) -> JiraSite:
    """The crafted edge-case site (see the module constants). Projects: OPS (browse group ``jira-users`` plus role
    10002 "Developers" = group ``ops-devs`` and user ``acc-carol``), SEC (``security-team``), NEW (empty, the target
    of the move), OLD (archived) and HID (invisible to the API user). Every ``updated`` is in March 2024 UTC."""
    site = JiraSite(user_timezone=user_timezone, account_id="acc-rag-bot", display_name="RAG Bot")
    site.add_project(
        "OPS",
        "Operations",
        project_id=OPS_PROJECT_ID,
        browse_groups=OPS_BROWSE_GROUPS,
        role_actors={OPS_ROLE_ID: {"name": OPS_ROLE_NAME, "groups": OPS_ROLE_GROUPS, "users": OPS_ROLE_USERS}},
    )
    site.add_project("SEC", "Security", project_id=SEC_PROJECT_ID, browse_groups=SEC_BROWSE_GROUPS)
    site.add_project("NEW", "New Platform", project_id=NEW_PROJECT_ID, browse_groups=NEW_BROWSE_GROUPS)
    site.add_project("OLD", "Legacy Tools", project_id=OLD_PROJECT_ID, archived=True, browse_groups=OLD_BROWSE_GROUPS)
    site.add_project("HID", "HR Private", project_id=HID_PROJECT_ID, visible=False, browse_groups=HID_BROWSE_GROUPS)

    ops = "Operations"
    issues = [
        _issue(
            BOUNDARY_LATE_ID,
            BOUNDARY_LATE_KEY,
            "Nightly backup finished one millisecond before midnight",
            created="2024-03-01T08:00:00.000+0000",
            updated=BOUNDARY_LATE_UPDATED,
            description="The nightly backup job of the billing database finished at 23:59:59.999 UTC.",
            comments=_two_comments(BOUNDARY_LATE_ID, "2024-03-02", "Backup verified.", "Restore test passed too."),
            issuetype="Task",
            status="Resolved",
            labels=("backup",),
            components=("database",),
            project_name=ops,
        ),
        _issue(
            BOUNDARY_EARLY_ID,
            BOUNDARY_EARLY_KEY,
            "Certificate rotation ran exactly at midnight",
            created="2024-03-01T09:00:00.000+0000",
            updated=BOUNDARY_EARLY_UPDATED,
            description="The TLS certificate rotation cron fired at 00:00:00.000 UTC and renewed api.example.com.",
            comments=_two_comments(BOUNDARY_EARLY_ID, "2024-03-02", "Rotation log attached.", "Expiry is now June."),
            issuetype="Task",
            status="Closed",
            labels=("tls", "cron"),
            project_name=ops,
        ),
        _issue(
            TZ_TRAP_ID,
            TZ_TRAP_KEY,
            "Pager storm just before midnight Pacific",
            created="2024-03-01T10:00:00.000+0000",
            updated=TZ_TRAP_UPDATED,
            description="Thirty alerts fired at 23:59:30 Pacific time (07:59:30 UTC) from the edge proxies.",
            comments=_two_comments(TZ_TRAP_ID, "2024-03-03", "Alert dedup rule added.", "Storm did not recur."),
            priority="Critical",
            labels=("alerts",),
            components=("edge",),
            project_name=ops,
        ),
        _issue(
            TZ_AFTER_ID,
            TZ_AFTER_KEY,
            "Disk usage report at midnight Pacific",
            created="2024-03-01T11:00:00.000+0000",
            updated=TZ_AFTER_UPDATED,
            description="The weekly disk usage report ran at 00:00 Pacific time (08:00 UTC); /var is at 81%.",
            comments=_two_comments(TZ_AFTER_ID, "2024-03-03", "Rotated the logs.", "Now at 64%."),
            issuetype="Task",
            priority="Minor",
            project_name=ops,
        ),
        _issue(
            ADF_ALL_ID,
            ADF_ALL_KEY,
            "Login outage write-up (rich text)",
            created="2024-03-05T09:00:00.000+0000",
            updated=ADF_ALL_UPDATED,
            description=ADF_ALL_DOC,
            comments=[_comment("200051", CAROL, ADF_COMMENT_DOC, "2024-03-06T10:15:00.000+0000")],
            priority="Critical",
            status="In Progress",
            labels=("outage", "auth"),
            components=("auth",),
            assignee=CAROL,
            project_name=ops,
        ),
        _huge_thread(ops),
        _issue(
            LINKED_DUPLICATE_ID,
            LINKED_DUPLICATE_KEY,
            "Checkout page times out (duplicate report)",
            created="2024-03-06T08:00:00.000+0000",
            updated=LINKED_UPDATED[0],
            description="Customers report checkout timeouts after 30 s. Same as the payment gateway latency issue.",
            comments=_two_comments(LINKED_DUPLICATE_ID, "2024-03-06", "Linked the original.", "Closing as dup."),
            status="Closed",
            resolution={
                "id": "3",
                "name": "Duplicate",
                "description": "The problem is a duplicate of an existing issue.",
            },
            issuelinks=[
                {
                    "id": DUPLICATE_LINK_ID,
                    "type": _DUPLICATE,
                    "outwardIssue": _link_ref(LINKED_ORIGINAL_ID, LINKED_ORIGINAL_KEY, "Payment gateway latency"),
                },
                {
                    "id": BLOCKS_LINK_ID,
                    "type": _BLOCKS,
                    "inwardIssue": _link_ref(LINKED_ORIGINAL_ID, LINKED_ORIGINAL_KEY, "Payment gateway latency"),
                },
            ],
            project_name=ops,
        ),
        _issue(
            LINKED_ORIGINAL_ID,
            LINKED_ORIGINAL_KEY,
            "Payment gateway latency",
            created="2024-03-06T07:00:00.000+0000",
            updated=LINKED_UPDATED[1],
            description="p99 latency of the payment gateway went from 800 ms to 31 s after the TLS library upgrade.",
            comments=_two_comments(LINKED_ORIGINAL_ID, "2024-03-06", "Bisected to the upgrade.", "Pinned 3.1.4."),
            priority="Critical",
            status="In Progress",
            components=("payments",),
            issuelinks=[
                {
                    "id": DUPLICATE_LINK_ID,
                    "type": _DUPLICATE,
                    "inwardIssue": _link_ref(LINKED_DUPLICATE_ID, LINKED_DUPLICATE_KEY, "Checkout page times out"),
                },
                {
                    "id": BLOCKS_LINK_ID,
                    "type": _BLOCKS,
                    "outwardIssue": _link_ref(LINKED_DUPLICATE_ID, LINKED_DUPLICATE_KEY, "Checkout page times out"),
                },
            ],
            project_name=ops,
        ),
        _issue(
            WIKI_ID,
            WIKI_KEY,
            "Deploy runbook for the API service",
            created="2024-03-07T12:00:00.000+0000",
            updated=WIKI_UPDATED,
            description=WIKI_DESCRIPTION,
            comments=_two_comments(
                WIKI_ID, "2024-03-08", "h3. Update\nUse {{--wait}} with the restart.", "See [rollback|http://y]."
            ),
            issuetype="Improvement",
            labels=("runbook",),
            project_name=ops,
        ),
        _issue(
            MOVED_ID,
            MOVED_KEY,
            "Migrate the job scheduler to the new platform",
            created="2024-03-08T09:00:00.000+0000",
            updated=MOVED_UPDATED,
            description="The cron-based scheduler moves to the new platform's workflow engine.",
            comments=_two_comments(MOVED_ID, "2024-03-08", "Design doc reviewed.", "Moving to NEW."),
            issuetype="Task",
            reporter=DAVE,
            project_name=ops,
        ),
        _issue(
            DELETED_ID,
            DELETED_KEY,
            "Test issue created by mistake",
            created="2024-03-09T08:00:00.000+0000",
            updated=DELETED_UPDATED,
            description="Please delete this issue, it was filed in the wrong project.",
            comments=_two_comments(DELETED_ID, "2024-03-09", "Will delete.", "Thanks."),
            issuetype="Task",
            priority="Minor",
            project_name=ops,
        ),
        _issue(
            BAD_BODY_ID,
            BAD_BODY_KEY,
            "Imported issue with a corrupt description",
            created="2024-03-01T12:00:00.000+0000",
            updated=BAD_BODY_UPDATED,
            description=BAD_BODY_DESCRIPTION,
            comments=_two_comments(BAD_BODY_ID, "2024-03-03", "Import script bug?", "Yes, fixed in v2."),
            project_name=ops,
        ),
        _issue(
            SECURE_ID,
            SECURE_KEY,
            "Rotate the leaked deploy key",
            created="2024-03-11T09:00:00.000+0000",
            updated=SECURE_UPDATED,
            description="A deploy key was pushed to a public fork. Rotate it and audit the access logs.",
            comments=_two_comments(SECURE_ID, "2024-03-11", "Key revoked.", "Audit shows no use."),
            priority="Critical",
            status="Resolved",
            labels=("security",),
            reporter=CAROL,
            assignee=ALICE,
            project_name="Security",
            security=dict(SECURITY_LEVEL),
        ),
        _issue(
            ARCHIVED_ISSUE_ID,
            ARCHIVED_ISSUE_KEY,
            "Decommission the legacy FTP server",
            created="2024-03-01T13:00:00.000+0000",
            updated=ARCHIVED_ISSUE_UPDATED,
            description="The legacy FTP server is switched off; the project is archived.",
            status="Closed",
            project_name="Legacy Tools",
        ),
        _issue(
            HIDDEN_ISSUE_ID,
            HIDDEN_ISSUE_KEY,
            "Salary review",
            created="2024-03-01T14:00:00.000+0000",
            updated=HIDDEN_ISSUE_UPDATED,
            description=HIDDEN_TEXT,
            reporter=DAVE,
            assignee=DAVE,
            project_name="HR Private",
        ),
    ]
    for issue in issues:
        site.add_issue(issue)
    return site


def _huge_thread(project_name: str) -> dict[str, Any]:
    start = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
    comments = [
        _comment(
            str(400000 + i),
            ALICE if i % 2 else BOB,
            f"comment number {i}",
            _jira_time(start + timedelta(minutes=30 * (i - 1))),
        )
        for i in range(1, HUGE_THREAD_COMMENTS + 1)
    ]
    if comments[-1]["created"] != HUGE_THREAD_UPDATED:
        raise AssertionError("HUGE_THREAD_UPDATED must be the last comment's time")
    return _issue(
        HUGE_THREAD_ID,
        HUGE_THREAD_KEY,
        "Flaky integration tests on the ARM runners",
        created="2024-03-01T09:00:00.000+0000",
        updated=HUGE_THREAD_UPDATED,
        description="The integration suite fails one run in five on the ARM runners; collect findings here.",
        comments=comments,
        labels=("ci", "flaky"),
        components=("ci",),
        project_name=project_name,
    )


# -- synthetic site ---------------------------------------------------------------------------------------------------

SYNTH_FIRST_ISSUE_ID = 100000
_SYNTH_COPIED_FIELDS = ("issuetype", "status", "resolution", "priority", "labels", "components")
_SYNTH_PEOPLE = ("reporter", "creator", "assignee")


def synthetic_project_key(index: int) -> str:
    """The key of the index-th synthetic project: ``P1``, ``P2``, ..."""
    return f"P{index + 1}"


@functools.lru_cache(maxsize=1)
def _bundled_sources() -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """The bundled issues (read once; never mutated) and every non-empty comment body of the dump."""
    issues: list[dict[str, Any]] = []
    bodies: list[str] = []
    with gzip.open(BUNDLED_DUMP, "rt", encoding="utf-8") as handle:
        for line in handle:
            issue = json.loads(line)
            issues.append(issue)
            for comment in issue["fields"].get("comment", {}).get("comments", []):
                if isinstance(comment.get("body"), str) and comment["body"].strip():
                    bodies.append(comment["body"])
    return tuple(issues), tuple(bodies)


def synthetic_site(
    projects: int = 3,
    days: int = 90,
    issues_per_day: int = 4,
    start: str = "2024-01-01",
    comments_per_issue: int = 3,
    seed: int = 0,
) -> JiraSite:
    """``projects`` projects (``P1``, ``P2``, ... ids ``11001``...) × ``days`` UTC days from ``start`` ×
    ``issues_per_day`` issues per project-day, built from the bundled issues' texts (summary, description, comment
    bodies and issuetype/status/priority/people, recycled in a seeded shuffle). Each issue gets new ids (from
    100000) and keys (numbered in created order per project); it is created and updated on its day at pseudo-random
    times (updated after created) with ``comments_per_issue`` comments in between. Deterministic for a seed."""
    if projects < 1 or days < 1 or issues_per_day < 1 or comments_per_issue < 0:
        raise ValueError("projects, days and issues_per_day must be >= 1, comments_per_issue >= 0")
    sources, pool = _bundled_sources()
    rng = random.Random(seed)
    order = list(range(len(sources)))
    rng.shuffle(order)
    site = JiraSite()
    base = datetime.strptime(start, "%Y-%m-%d").replace(tzinfo=UTC)
    next_id = SYNTH_FIRST_ISSUE_ID
    next_comment_id = 1_000_000
    used = 0
    for p in range(projects):
        key = synthetic_project_key(p)
        site.add_project(key, f"Synthetic project {p + 1}", project_id=str(11001 + p))
        number = 0
        for d in range(days):
            day_start = base + timedelta(days=d)
            created_ms = sorted(rng.randrange(0, 86_400_000 - 60_000) for _ in range(issues_per_day))
            for created_offset in created_ms:
                source = sources[order[used % len(order)]]
                used += 1
                number += 1
                created = day_start + timedelta(milliseconds=created_offset)
                updated = created + timedelta(milliseconds=rng.randrange(1, 86_400_000 - created_offset))
                source_fields = source["fields"]
                source_bodies = [
                    c["body"]
                    for c in source_fields.get("comment", {}).get("comments", [])
                    if isinstance(c.get("body"), str) and c["body"].strip()
                ]
                span = (updated - created) / (comments_per_issue + 1)
                comments = []
                for c in range(comments_per_issue):
                    body = source_bodies[c] if c < len(source_bodies) else pool[rng.randrange(len(pool))]
                    people = [source_fields.get(name) for name in ("reporter", "assignee")]
                    author = people[c % 2] or people[0] or _person(ALICE)
                    comments.append(
                        {
                            "id": str(next_comment_id),
                            "author": copy.deepcopy(author),
                            "body": body,
                            "created": _jira_time(created + span * (c + 1)),
                            "updated": _jira_time(created + span * (c + 1)),
                        }
                    )
                    next_comment_id += 1
                fields: dict[str, Any] = {
                    name: copy.deepcopy(source_fields.get(name)) for name in _SYNTH_COPIED_FIELDS + _SYNTH_PEOPLE
                }
                fields.update(
                    {
                        "project": {"key": key},
                        "summary": source_fields.get("summary") or f"Synthetic issue {key}-{number}",
                        "description": source_fields.get("description"),
                        "environment": None,
                        "created": _jira_time(created),
                        "updated": _jira_time(updated),
                        "issuelinks": [],
                        "subtasks": [],
                        "attachment": [],
                        "comment": {
                            "comments": comments,
                            "maxResults": len(comments),
                            "total": len(comments),
                            "startAt": 0,
                        },
                    }
                )
                site.add_issue({"id": str(next_id), "key": f"{key}-{number}", "fields": fields})
                next_id += 1
    return site
