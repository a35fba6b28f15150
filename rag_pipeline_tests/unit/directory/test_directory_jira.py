"""The Jira half of the principal directory, read through the real atlassian-python-api client from the Jira
emulator (Cloud and Server): groups and their paged members, Browse projects grants through groups and project
roles, issue security levels, and one person joined with their Slack account by email."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipeline.connectors.jira import directory as jira_directory
from rag_pipeline.connectors.jira.api import JiraApiReader, JiraSyncSettings
from rag_pipeline.connectors.jira.client import build_jira_client
from rag_pipeline.connectors.jira.dump import project_group, role_group, security_level_group
from rag_pipeline.connectors.slack import directory as slack_directory
from rag_pipeline.directory.explain import explain
from rag_pipeline.directory.people import find_person
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.directory.sync import sync_directory
from rag_pipeline.index.store import IndexedAcl
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline_tests.kit import slack_fixtures as SF
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraSite
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.slack_index import reader as slack_reader

SITE = "jira.directory.test"
USER, TOKEN, PAT = "bot@example.com", "jira-test-token", "jira-test-pat"
MODES = [pytest.param(True, id="cloud"), pytest.param(False, id="server")]
OPS, HR, SECURE = project_group(SITE, "OPS"), project_group(SITE, "HR"), security_level_group(SITE, "10001")


def group(name: str) -> str:
    return f"jira:{SITE}:group:{name}"


def site() -> JiraSite:
    """OPS is browsed by jira-devs and, through its Developers role, by contractors and one named user; HR by
    hr-team; security level 10001 ("Internal") admits jira-devs and one named user. 120 extra members of
    jira-users page group/member (50 a page)."""
    s = JiraSite()
    s.add_user("acc-alice", "Alice Anders", email="Alice.Anders@Crafted.Example", groups=["jira-devs", "jira-users"])
    s.add_user("acc-carl", "Carl Contractor", email="carl@contractor.example", groups=["contractors"])
    s.add_user("acc-rolf", "Rolf Role", email="rolf@crafted.example")
    s.add_user("acc-helen", "Helen HR", groups=["hr-team", "jira-users"])
    s.add_user("acc-old", "Old Timer", email="old@crafted.example", active=False, groups=["jira-devs"])
    for n in range(120):
        s.add_user(f"acc-{n:03d}", f"User {n}", email=f"user{n}@crafted.example", groups=["jira-users"])
    s.add_project(
        "OPS",
        browse_groups=["jira-devs"],
        role_actors={"10002": {"name": "Developers", "groups": ["contractors"], "users": ["acc-rolf"]}},
    )
    s.add_project("HR", browse_groups=["hr-team"])
    s.add_security_level("10001", "Internal", groups=["jira-devs"], users=["acc-helen"])  # fmt: skip
    return s


def reader(emu: JiraEmulator, cloud: bool) -> JiraApiReader:
    auth = {"username": USER, "api_token": TOKEN} if cloud else {"personal_access_token": PAT}
    client = build_jira_client(emu.url, cloud=cloud, stats=ApiStats(), backoff_seconds=0, **auth)
    return JiraApiReader(client, JiraSyncSettings(cloud=cloud, site=SITE))


@pytest.mark.parametrize("cloud", MODES)
def test_jira_directory_from_the_api(cloud: bool) -> None:
    with JiraEmulator(site(), cloud=cloud) as emu:
        snapshot = jira_directory.read_api_directory(reader(emu, cloud))
        paths = [r.path.split("/rest/api/")[1].split("?")[0] for r in emu.requests]
    accounts = snapshot.accounts
    alice = accounts["acc-alice"]
    # A user in two groups holds both, plus what they grant: Browse on OPS and the Internal security level.
    assert set(alice.groups) == {group("jira-devs"), group("jira-users"), OPS, SECURE}
    assert alice.groups[OPS] == "Browse projects on OPS via group jira-devs"
    assert alice.groups[SECURE] == 'security level "Internal" via group jira-devs'
    assert alice.email == "alice.anders@crafted.example"
    assert accounts["acc-carl"].groups[OPS] == "Browse projects on OPS via group contractors"
    # The Developers role of OPS (user acc-rolf, group contractors) is a grant of its own, for comments
    # restricted to the role.
    developers = role_group(SITE, "OPS", "Developers")
    assert accounts["acc-rolf"].groups == {
        OPS: "Browse projects on OPS as a project role member",
        developers: "project role Developers in OPS",
    }
    assert accounts["acc-carl"].groups[developers] == "project role Developers in OPS via group contractors"
    assert developers not in alice.groups
    assert set(accounts["acc-helen"].groups) == {group("hr-team"), group("jira-users"), HR, SECURE}
    # Inactive accounts are listed (whois says so) and hold nothing.
    assert accounts["acc-old"].status == "inactive" and not accounts["acc-old"].groups
    assert len(accounts) == 125 and not snapshot.problems
    # group/member pages at 50: jira-users has 122 members -> 3 pages.
    version = "3" if cloud else "2"
    members = [p for p in paths if p == f"{version}/group/member"]
    assert len(members) == 3 + 1 + 1 + 1  # jira-users, jira-devs, contractors, hr-team
    assert (f"{version}/group/bulk" in paths) is cloud and (f"{version}/groups/picker" in paths) is not cloud
    assert snapshot.api_calls == len(paths)


def test_one_person_with_a_slack_and_a_jira_account(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "directory.sqlite")
    workspace = SF.crafted_workspace()
    workspace.scopes.add("users:read.email")
    next(u for u in workspace.users if u["id"] == SF.ALICE)["profile"]["email"] = "alice.anders@crafted.example"
    with SlackEmulator(workspace) as slack, JiraEmulator(site()) as jira:
        sync_directory(slack_directory.read_api_directory(slack_reader(slack)), store)
        first = sync_directory(jira_directory.read_api_directory(reader(jira, True)), store)
        alice = find_person(store, "ALICE.anders@crafted.example")
        assert alice.ids() == {"jira": ["acc-alice"], "slack": [SF.ALICE]}
        assert {OPS, SECURE, f"slack:{SF.CRAFTED_TEAM}:members"} <= set(alice.groups())

        # Alice leaves jira-devs: the next sync takes OPS and the security level away (they came through it),
        # and the change is honoured when the directory is written (readers resolve from it).
        jira.site.remove_from_group("jira-devs", "acc-alice")
        second = sync_directory(jira_directory.read_api_directory(reader(jira, True)), store)
    assert first.change.previous_at is None
    assert second.change.lost == {"acc-alice": sorted([group("jira-devs"), OPS, SECURE])}
    assert second.acl_lag_seconds is not None and second.acl_lag_seconds >= 0
    alice = find_person(store, "acc-alice")
    assert OPS not in alice.groups() and group("jira-users") in alice.groups()
    hidden = explain(alice, f"jira:{SITE}:2", IndexedAcl(groups=frozenset({SECURE})), store)
    assert not hidden.visible
    assert hidden.because[0].startswith(f"restricted to Jira security level 10001 on {SITE}: Alice Anders")
