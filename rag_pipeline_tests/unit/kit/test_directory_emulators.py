"""The emulators' principal directory, driven by the real clients: Slack ``users.list``/``users.info`` (paging, the
``users:read.email`` scope, guests, bots, deleted and external users, membership changes, exports) and Jira's users,
groups and issue security levels (``group/member`` paging with inactive users filtered, ``group/bulk``,
``groups/picker``, ``issuesecurityschemes`` and their level members) on Cloud and Server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from atlassian import Jira
from requests import HTTPError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraSite, group_id
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import DEFAULT_SCOPES, EMAIL_SCOPE, SlackWorkspace

SLACK_TOKEN = "xoxb-test-token"
TEAM = "T0DIR00001"
PARTNER = "T0PARTNER1"
JIRA_USER = "bot@example.com"
JIRA_TOKEN = "jira-test-token"


# -- Slack ------------------------------------------------------------------------------------------------------------


def slack_workspace(users: int = 0) -> SlackWorkspace:
    """``users`` plain members ``U0000000``..., then a deleted user, a bot, two guests (all listed) and an external
    user (not listed)."""
    ws = SlackWorkspace(team_id=TEAM, domain="dir.slack.com")
    for n in range(users):
        ws.add_user(f"U{n:07d}", f"user{n}", email=f"user{n}@example.com")
    ws.add_user("UDELETED", "gone", email="gone@example.com", deleted=True)
    ws.add_user("UBOT", "helper", is_bot=True, real_name="Helper Bot")
    ws.add_user("UMULTI", "multi", email="multi@example.com", guest="multi")
    ws.add_user("USINGLE", "single", email="single@example.com", guest="single")
    ws.add_user("UEXT", "partner", email="partner@partner.example", team_id=PARTNER)
    ws.add_channel("C0PRIV", "secret", is_private=True, members=["U0000000", "UMULTI"])
    return ws


@pytest.fixture
def slack() -> Iterator[SlackEmulator]:
    with SlackEmulator(slack_workspace(users=446)) as emulator:
        yield emulator


def slack_client(emulator: SlackEmulator) -> WebClient:
    return WebClient(token=SLACK_TOKEN, base_url=emulator.base_url, retry_handlers=[], timeout=5)


def all_users(client: WebClient, limit: int) -> list[dict[str, Any]]:
    return [user for page in client.users_list(limit=limit) for user in page["members"]]


def test_slack_users_list_pages_and_keeps_flags(slack: SlackEmulator) -> None:
    slack.workspace.scopes.add(EMAIL_SCOPE)
    users = all_users(slack_client(slack), limit=200)
    assert len(users) == 450 and len(slack.calls("users.list")) == 3
    assert [r.params.get("limit") for r in slack.calls("users.list")] == ["200"] * 3
    by_id = {u["id"]: u for u in users}
    assert "UEXT" not in by_id  # external (Slack Connect) users are not listed
    assert by_id["U0000007"]["profile"]["email"] == "user7@example.com"
    assert by_id["U0000007"]["profile"]["display_name"] == "user7"
    assert (by_id["UDELETED"]["deleted"], by_id["UDELETED"]["profile"]["email"]) == (True, "gone@example.com")
    assert by_id["UBOT"]["is_bot"] is True and "email" not in by_id["UBOT"]["profile"]
    assert by_id["UBOT"]["real_name"] == by_id["UBOT"]["profile"]["real_name"] == "Helper Bot"
    flags = ("deleted", "is_bot", "is_restricted", "is_ultra_restricted")
    assert [by_id["UMULTI"][f] for f in flags] == [False, False, True, False]
    assert [by_id["USINGLE"][f] for f in flags] == [False, False, True, True]
    assert [by_id["U0000000"][f] for f in flags] == [False, False, False, False]
    external = slack_client(slack).users_info(user="UEXT")["user"]
    assert (external["team_id"], external["profile"]["email"]) == (PARTNER, "partner@partner.example")


def test_slack_email_needs_the_scope(slack: SlackEmulator) -> None:
    assert EMAIL_SCOPE not in slack.workspace.scopes == set(DEFAULT_SCOPES)
    client = slack_client(slack)
    users = all_users(client, limit=1000)
    assert len(users) == 450 and not [u for u in users if "email" in u["profile"]]
    assert "email" not in client.users_info(user="UMULTI")["user"]["profile"]
    slack.workspace.scopes.add(EMAIL_SCOPE)
    assert client.users_info(user="UMULTI")["user"]["profile"]["email"] == "multi@example.com"
    slack.workspace.scopes.discard("users:read")
    with pytest.raises(SlackApiError) as excinfo:
        client.users_list()
    assert excinfo.value.response["needed"] == "users:read"
    assert slack.workspace.user("UMULTI")["profile"]["email"] == "multi@example.com"  # served copies only


def test_slack_5000_users_page_at_200() -> None:
    with SlackEmulator(slack_workspace(users=4996)) as emulator:
        users = all_users(slack_client(emulator), limit=200)
        assert len(users) == 5000 and len({u["id"] for u in users}) == 5000
        assert len(emulator.calls("users.list")) == 25


def test_slack_add_user_replaces_and_membership_changes(slack: SlackEmulator) -> None:
    ws = slack.workspace
    with pytest.raises(ValueError, match="guest"):
        ws.add_user("UBAD", "bad", guest="full")
    ws.add_user("UEXT", "partner-now-member", team_id=TEAM)  # same id: replaced, now a workspace user
    assert "UEXT" not in ws.external_users and [u["id"] for u in ws.users].count("UEXT") == 1
    ws.add_user("U0000001", "renamed")
    assert len(ws.users) == 451 and ws.user("U0000001")["name"] == "renamed"
    client = slack_client(slack)
    ws.add_member("C0PRIV", "USINGLE")
    ws.add_member("C0PRIV", "USINGLE")
    assert client.conversations_members(channel="C0PRIV")["members"] == ["U0000000", "UMULTI", "USINGLE"]
    ws.remove_member("C0PRIV", "UMULTI")
    ws.remove_member("C0PRIV", "UMULTI")
    assert client.conversations_members(channel="C0PRIV")["members"] == ["U0000000", "USINGLE"]


def test_slack_export_has_users_with_emails_and_mpims(tmp_path: Path) -> None:
    ws = slack_workspace(users=3)
    ws.write_export(tmp_path)
    assert json.loads((tmp_path / "mpims.json").read_text()) == []
    users = {u["id"]: u for u in json.loads((tmp_path / "users.json").read_text())}
    assert users["U0000002"]["profile"]["email"] == "user2@example.com"
    assert users["UEXT"]["team_id"] == PARTNER and users["USINGLE"]["is_ultra_restricted"] is True
    loaded = SlackWorkspace.from_export(tmp_path, TEAM, "dir.slack.com")
    assert loaded.users == ws.users and loaded.external_users == ws.external_users
    assert loaded.channels["C0PRIV"].members == ["U0000000", "UMULTI"]


# -- Jira -------------------------------------------------------------------------------------------------------------


def jira_site() -> JiraSite:
    """``staff``: 120 active members (every third without an email) and 10 inactive ones; a few more groups and
    two security levels."""
    site = JiraSite()
    for n in range(130):
        site.add_user(
            f"acc-{n:03d}",
            f"Person {n}",
            email=None if n % 3 == 0 else f"p{n}@example.com",
            active=n < 120,
            groups=["staff"],
        )
    site.add_user("acc-admin", "Admin", email="admin@example.com", groups=["jira-admins", "Staff-Leads"])
    site.add_group("jira-users", ["acc-000", "acc-admin"])
    site.add_group("empty")
    site.add_security_level("10200", "Staff only", groups=["staff", "jira-admins"], users=["acc-007"])
    site.add_security_level("10201", "Admins", groups=["jira-admins"], description="Admins and the reporter")
    return site


@pytest.fixture
def jira_emu() -> Iterator[JiraEmulator]:
    with JiraEmulator(jira_site()) as emulator:
        yield emulator


@pytest.fixture
def jira_server_emu() -> Iterator[JiraEmulator]:
    with JiraEmulator(jira_site(), cloud=False) as emulator:
        yield emulator


def cloud_jira(emu: JiraEmulator) -> Jira:
    return Jira(url=emu.url, username=JIRA_USER, password=JIRA_TOKEN, cloud=True, api_version="3", timeout=5)


def server_jira(emu: JiraEmulator) -> Jira:
    return Jira(url=emu.url, username=JIRA_USER, password=JIRA_TOKEN, cloud=False, timeout=5)


def group_members(jira: Jira, group: str, *, inactive: bool = False, limit: int = 50) -> list[dict[str, Any]]:
    """Every member of a group, page by page until ``isLast``."""
    members: list[dict[str, Any]] = []
    start = 0
    while True:
        page = jira.get_all_users_from_group(group, include_inactive_users=inactive, start=start, limit=limit)
        members.extend(page["values"])
        if page["isLast"]:
            return members
        start += len(page["values"])


@pytest.mark.parametrize("cloud", [True, False])
def test_jira_group_members_page_and_filter_inactive(
    jira_emu: JiraEmulator, jira_server_emu: JiraEmulator, cloud: bool
) -> None:
    emu, jira = (jira_emu, cloud_jira(jira_emu)) if cloud else (jira_server_emu, server_jira(jira_server_emu))
    version = 3 if cloud else 2
    path = f"/rest/api/{version}/group/member"
    members = group_members(jira, "staff")
    assert [m["accountId"] for m in members] == [f"acc-{n:03d}" for n in range(120)]
    calls = emu.calls(path)
    assert len(calls) == 3 and [c.status for c in calls] == [200] * 3
    assert calls[0].params == {
        "groupname": "staff",
        "includeInactiveUsers": "False",
        "startAt": "0",
        "maxResults": "50",
    }
    assert members[1] == {
        "self": f"{emu.url}/rest/api/{version}/user?accountId=acc-001",
        "accountId": "acc-001",
        "name": "acc-001",
        "displayName": "Person 1",
        "active": True,
        "emailAddress": "p1@example.com",
    }
    assert "emailAddress" not in members[0]
    first = jira.get_all_users_from_group("staff", limit=500)  # capped at 50, like Cloud
    assert (first["startAt"], first["maxResults"], first["total"], first["isLast"]) == (0, 50, 120, False)
    assert first["self"].endswith("startAt=0&maxResults=50") and first["nextPage"].endswith("startAt=50&maxResults=50")
    with_inactive = group_members(jira, "staff", inactive=True)
    assert len(with_inactive) == 130 and not with_inactive[-1]["active"]
    last = jira.get_all_users_from_group("staff", start=100)
    assert (len(last["values"]), last["isLast"]) == (20, True) and "nextPage" not in last
    assert jira.get_all_users_from_group("empty")["values"] == []


def test_jira_group_member_errors_and_group_id(jira_emu: JiraEmulator) -> None:
    jira = cloud_jira(jira_emu)
    with pytest.raises(HTTPError, match="Group not found") as excinfo:
        jira.get_all_users_from_group("nobody")
    assert excinfo.value.response.status_code == 404
    assert excinfo.value.response.json() == {"errorMessages": ["Group not found"], "errors": {}}
    page = jira.get("rest/api/3/group/member", params={"groupId": group_id("jira-users")})
    assert [m["accountId"] for m in page["values"]] == ["acc-000", "acc-admin"]
    with pytest.raises(HTTPError, match="Group not found"):
        jira.get("rest/api/3/group/member", params={"groupId": "no-such-id", "groupname": "staff"})
    with pytest.raises(HTTPError):
        jira.get("rest/api/3/group/member")
    assert [r.status for r in jira_emu.calls("/rest/api/3/group/member")] == [404, 200, 404, 400]


def test_jira_site_directory_changes_are_served(jira_emu: JiraEmulator) -> None:
    site, jira = jira_emu.site, cloud_jira(jira_emu)
    site.remove_from_group("jira-users", "acc-000")
    site.remove_from_group("jira-users", "acc-000")  # no longer a member: no-op
    site.add_user("acc-new", "Newcomer", groups=["jira-users", "brand-new"])
    assert [m["accountId"] for m in group_members(jira, "jira-users")] == ["acc-admin", "acc-new"]
    assert site.groups["brand-new"] == ["acc-new"]
    with pytest.raises(KeyError):
        site.add_group("jira-users", ["acc-missing"])
    with pytest.raises(KeyError):
        site.remove_from_group("no-such-group", "acc-new")
    site.users["acc-admin"]["active"] = False
    assert [m["accountId"] for m in group_members(jira, "jira-users")] == ["acc-new"]


def test_jira_group_bulk_is_sorted_and_paged(jira_emu: JiraEmulator, jira_server_emu: JiraEmulator) -> None:
    names = ["Staff-Leads", "brand", "empty", "jira-admins", "jira-users", "staff"]
    jira_emu.site.add_group("brand")
    answer = cloud_jira(jira_emu).get("rest/api/3/group/bulk", params={"startAt": 0, "maxResults": 4})
    assert {k: v for k, v in answer.items() if k != "values"} == {
        "maxResults": 4,
        "startAt": 0,
        "total": 6,
        "isLast": False,
    }
    assert answer["values"] == [{"name": n, "groupId": group_id(n)} for n in sorted(names)[:4]]
    rest = cloud_jira(jira_emu).get("rest/api/2/group/bulk", params={"startAt": 4})
    assert [g["name"] for g in rest["values"]] == sorted(names)[4:] and rest["isLast"]
    picked = cloud_jira(jira_emu).get("rest/api/3/group/bulk", params={"groupName": ["staff", "empty"]})
    assert [g["name"] for g in picked["values"]] == ["empty", "staff"]
    server = server_jira(jira_server_emu).get("rest/api/2/group/bulk")
    assert server["total"] == 5 and server["maxResults"] == 50


def test_jira_groups_picker(jira_emu: JiraEmulator, jira_server_emu: JiraEmulator) -> None:
    server = server_jira(jira_server_emu)
    found = server.get_groups(query="STAFF")
    assert found["header"] == "Showing 2 of 2 matching groups" and found["total"] == 2
    assert found["groups"] == [
        {"name": "Staff-Leads", "html": "<b>Staff</b>-Leads", "labels": [], "groupId": group_id("Staff-Leads")},
        {"name": "staff", "html": "<b>staff</b>", "labels": [], "groupId": group_id("staff")},
    ]
    assert jira_server_emu.calls("/rest/api/2/groups/picker")[0].params == {"query": "STAFF", "maxResults": "20"}
    every = server.get_groups(limit=3)
    assert every["header"] == "Showing 3 of 5 matching groups"
    assert [g["name"] for g in every["groups"]] == ["Staff-Leads", "empty", "jira-admins"]
    assert [g["html"] for g in every["groups"]] == ["Staff-Leads", "empty", "jira-admins"]
    assert [g["name"] for g in server.get_groups(query="jira", exclude="jira-users")["groups"]] == ["jira-admins"]
    cloud = cloud_jira(jira_emu).get_groups(query="jira")
    assert [g["name"] for g in cloud["groups"]] == ["jira-admins", "jira-users"]
    assert jira_emu.calls("/rest/api/3/groups/picker")


def test_jira_issue_security_schemes_and_level_members(jira_emu: JiraEmulator) -> None:
    jira = cloud_jira(jira_emu)
    schemes = jira.get("rest/api/3/issuesecurityschemes")["issueSecuritySchemes"]
    assert [{k: v for k, v in s.items() if k != "self"} for s in schemes] == [
        {"id": 10100, "name": "Default scheme", "description": "", "defaultSecurityLevelId": -1}
    ]
    scheme = jira.get("rest/api/3/issuesecurityschemes/10100")
    assert (scheme["id"], scheme["name"]) == (10100, "Default scheme")
    assert [{k: v for k, v in level.items() if k != "self"} for level in scheme["levels"]] == [
        {"id": "10200", "name": "Staff only", "description": ""},
        {"id": "10201", "name": "Admins", "description": "Admins and the reporter"},
    ]
    with pytest.raises(HTTPError) as excinfo:
        jira.get("rest/api/3/issuesecurityschemes/99999")
    assert excinfo.value.response.status_code == 404

    members = jira.get("rest/api/3/issuesecurityschemes/level/member", params={"levelId": "10200"})
    assert {k: v for k, v in members.items() if k != "values"} == {
        "maxResults": 50,
        "startAt": 0,
        "total": 3,
        "isLast": True,
    }
    assert [
        (m["id"], m["issueSecurityLevelId"], m["holder"]["type"], m["holder"]["parameter"]) for m in members["values"]
    ] == [
        (10000, 10200, "group", "staff"),
        (10001, 10200, "group", "jira-admins"),
        (10002, 10200, "user", "acc-007"),
    ]
    every = jira.get("rest/api/2/issuesecurityschemes/level/member", params={"startAt": 2, "maxResults": 1})
    assert (every["total"], every["isLast"], every["values"][0]["id"]) == (4, False, 10002)
    both = jira.get("rest/api/3/issuesecurityschemes/level/member", params={"levelId": ["10201", "10200"]})
    assert [m["issueSecurityLevelId"] for m in both["values"]] == [10200, 10200, 10200, 10201]
    other = jira.get("rest/api/3/issuesecurityschemes/level/member", params={"schemeId": "1"})
    assert other["values"] == [] and other["total"] == 0
    paths = jira_emu.paths()
    assert paths.count("/rest/api/3/issuesecurityschemes/level/member") == 3 and len(paths) == 7


def test_jira_no_security_levels_no_scheme() -> None:
    with JiraEmulator(JiraSite(), cloud=False) as emu:
        jira = server_jira(emu)
        assert jira.get("rest/api/2/issuesecurityschemes") == {"issueSecuritySchemes": []}
        with pytest.raises(HTTPError):
            jira.get("rest/api/2/issuesecurityschemes/10100")
        empty = jira.get("rest/api/2/issuesecurityschemes/level/member")
        assert (empty["values"], empty["total"], empty["isLast"]) == ([], 0, True)
        assert [r.status for r in emu.requests] == [200, 404, 200]
