"""Fail closed everywhere (issue 47 part 4): a permission, membership or security-level read that fails or comes back
incomplete never gives anyone new access; it is reported, and read again later.

Every read goes through the real clients (slack-sdk, atlassian-python-api) to the emulators on 127.0.0.1, which
leave fields out (``hide_fields``), fail one channel's reads (``inject``) or break a listing's paging. The table of
what happens for each read is docs/notes/fail_closed.md.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_pipeline.connectors.jira import directory as jira_directory
from rag_pipeline.connectors.jira.api import JiraAccessError, JiraApiReader, JiraSyncSettings
from rag_pipeline.connectors.jira.client import build_jira_client
from rag_pipeline.connectors.jira.csv_export import JiraCsvReader
from rag_pipeline.connectors.jira.dump import JiraDumpReader, issue_to_document, project_group, security_level_group
from rag_pipeline.connectors.slack import directory as slack_directory
from rag_pipeline.connectors.slack import settings as slack_settings
from rag_pipeline.connectors.slack.acl_refresh import refresh_channel_acls
from rag_pipeline.connectors.slack.api import SlackAccessError
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.connectors.slack.reconcile import plan_channel
from rag_pipeline.connectors.slack.threads import thread_document_id, workspace_group
from rag_pipeline.defs.slack.resources import SlackResource
from rag_pipeline.directory.people import find_person
from rag_pipeline.directory.store import DirectoryChange, DirectoryStore
from rag_pipeline.directory.sync import sync_directory
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import SearchFilter
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.document import Acl
from rag_pipeline.sources.paging import GuardTripped
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraSite
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace
from rag_pipeline_tests.kit.slack_index import MARCH, TOKEN, index_threads, read_threads, reader

TEAM, PARTNER = "T0FAIL0001", "T0PARTNER9"
ALICE, BOB, CAROL, GUEST, NOTEAM, EXT = "U0ALICE", "U0BOB", "U0CAROL", "U0GUEST", "U0NOTEAM", "U0EXT"
GENERAL, SECRET, OTHER = "C0GENERAL", "C0SECRET", "C0OTHER"
MEMBERS = workspace_group(TEAM)
ROOT_TS = "1709290800.000100"  # 2024-03-01 11:00 UTC
SECRET_THREAD, OTHER_THREAD = (thread_document_id(TEAM, c, ROOT_TS) for c in (SECRET, OTHER))


def workspace() -> SlackWorkspace:
    """Three full members, a guest, a member whose team we hide, a Slack Connect user; a public channel and two
    private ones, each with one thread in March 2024."""
    ws = SlackWorkspace(team_id=TEAM, domain="failclosed.slack.com")
    for user_id, name in ((ALICE, "alice"), (BOB, "bob"), (CAROL, "carol"), (NOTEAM, "nora")):
        ws.add_user(user_id, name)
    ws.add_user(GUEST, "gina", guest="multi")
    ws.add_user(EXT, "erin", team_id=PARTNER)
    ws.add_channel(GENERAL, "general", members=[ALICE, BOB, CAROL, NOTEAM, GUEST])
    ws.add_channel(SECRET, "secret", is_private=True, members=[ALICE, BOB])
    ws.add_channel(OTHER, "other", is_private=True, members=[ALICE, CAROL])
    for channel in (GENERAL, SECRET, OTHER):
        ws.post(channel, {"ts": ROOT_TS, "user": ALICE, "text": f"the plan for #{channel}"})
    return ws


@pytest.fixture
def slack() -> Iterator[SlackEmulator]:
    with SlackEmulator(workspace()) as emulator:
        yield emulator


def index_of(emu: SlackEmulator, path: Path) -> EdgeVectorStore:
    store = EdgeVectorStore(path)
    store.create_collections(4)
    index_threads(store, read_threads(emu, GENERAL, SECRET, OTHER))
    return store


def stored_acl(store: EdgeVectorStore, doc_id: str) -> tuple[frozenset[str], frozenset[str]]:
    acl = store.indexed_documents(SearchFilter(document_ids=(doc_id,)))[doc_id].acl
    assert acl is not None
    return acl.users, acl.groups


# -- Slack: a channel record without is_private ----------------------------------------------------------------------


def test_a_channel_without_is_private_fails_alone_and_never_becomes_public(slack: SlackEmulator) -> None:
    slack.hide_fields("channel", "is_private", id=SECRET)
    discovery = reader(slack).discover()
    # Discovery keeps it (as private), so it still has a partition that the next run reads again; reported.
    kept = {c.id: c.is_private for c in discovery.channels}
    assert kept[SECRET] is True and kept[GENERAL] is False
    assert [p.location for p in discovery.problems] == ["slack conversations.list entry 2"]
    assert "is_private" in discovery.problems[0].reason and SECRET in discovery.problems[0].reason

    with pytest.raises(SlackAccessError, match=f"{SECRET}.*no is_private field"):
        reader(slack).read_days(SECRET, MARCH)
    # Reconciliation asks conversations.info too: the channel fails there as well, no ACL is planned.
    with pytest.raises(SlackAccessError, match="is_private"):
        plan_channel(reader(slack), SECRET, {}, lookback_days=30)

    # Through the connector: that channel alone fails (named for rag/failed_containers), the others are read.
    resource = SlackResource(token=TOKEN, base_url=slack.base_url, server_error_retries=0)
    read = resource.read_partitions({SECRET: MARCH, GENERAL: MARCH, OTHER: MARCH})
    assert list(read.failed) == [SECRET] and "is_private" in read.failed[SECRET]
    acls = {doc.container: doc.acl for doc in read.documents}
    assert set(acls) == {GENERAL, OTHER} and MEMBERS in acls[GENERAL].groups and not acls[OTHER].groups

    # Once Slack says again, the channel is read with its members' ACL, never the workspace's.
    slack.hide_fields("channel", id=SECRET)
    (doc,) = reader(slack).read_days(SECRET, MARCH).documents
    assert doc.acl == Acl(users=(ALICE, BOB))


def test_the_directory_counts_a_channel_without_is_private_as_private(slack: SlackEmulator, tmp_path: Path) -> None:
    store = index_of(slack, tmp_path / "index")  # read while Slack still says which channels are private
    slack.hide_fields("channel", "is_private", id=SECRET)
    slack.hide_fields("channel", "is_private", id=GENERAL)
    snapshot = slack_directory.read_api_directory(reader(slack))
    # Both are recorded as private channels naming their members: the public one is narrowed, not widened.
    assert snapshot.channel_members[SECRET] == ("secret", True, (ALICE, BOB))
    assert snapshot.channel_members[GENERAL][1] is True
    flagged = sorted(p.location for p in snapshot.problems if "is_private" in p.reason)
    assert flagged == [f"slack channel #general ({GENERAL})", f"slack channel #secret ({SECRET})"]

    # Even a directory change that says "public" never gives a private channel's threads to the workspace: only
    # the channel's own read (conversations.info) may. Narrowing still applies.
    try:
        widen = DirectoryChange("slack", TEAM, 0.0, 0.0, channels={SECRET: ("secret", False, ())})
        assert refresh_channel_acls(store, TEAM, widen) == []
        assert stored_acl(store, SECRET_THREAD) == (frozenset({ALICE, BOB}), frozenset())
        narrow = DirectoryChange("slack", TEAM, 0.0, 0.0, channels={SECRET: ("secret", True, (ALICE,))})
        assert refresh_channel_acls(store, TEAM, narrow) == [SECRET_THREAD]
        assert stored_acl(store, SECRET_THREAD) == (frozenset({ALICE}), frozenset())
    finally:
        store.close()


# -- Slack: guests and external members ------------------------------------------------------------------------------


def test_accounts_missing_guest_flags_or_team_never_hold_the_workspace_group(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    slack.hide_fields("user", "is_restricted", "is_ultra_restricted", id=GUEST)
    slack.hide_fields("user", "team_id", "profile.team", id=NOTEAM)
    slack.hide_fields("user", "is_ultra_restricted", id=CAROL)  # one flag left out is enough
    store = DirectoryStore(tmp_path / "directory.sqlite")
    sync = sync_directory(slack_directory.read_api_directory(reader(slack)), store)
    statuses = {a: x.status for a, x in sync_snapshot_accounts(store).items()}
    assert statuses == {ALICE: "member", BOB: "member", CAROL: "guest", GUEST: "guest", NOTEAM: "external"}
    for person in (GUEST, NOTEAM, CAROL):
        assert MEMBERS not in find_person(store, f"slack:{person}").principal().groups, person
    assert MEMBERS in find_person(store, f"slack:{ALICE}").principal().groups  # not vacuous
    reasons = {p.location.split("(")[-1].rstrip(")"): p.reason for p in sync.problems}
    assert "is_restricted missing" in reasons[f"'{GUEST}'"] and "guest" in reasons[f"'{GUEST}'"]
    assert "no team_id" in reasons[f"'{NOTEAM}'"] and "external" in reasons[f"'{NOTEAM}'"]
    assert "is_ultra_restricted missing" in reasons[f"'{CAROL}'"]
    assert f"'{ALICE}'" not in reasons


def sync_snapshot_accounts(store: DirectoryStore) -> dict[str, object]:
    """The Slack accounts of the store, by id (users.list's five; the external one is in no channel it reads)."""
    ids = (ALICE, BOB, CAROL, GUEST, NOTEAM)
    return {i: store.by_id(i, "slack")[0] for i in ids}


def test_exports_are_strict_when_they_say_and_the_bundled_one_stays_members(tmp_path: Path) -> None:
    # The bundled Ubuntu export says nothing of teams or guests for anyone: everyone stays a member.
    bundled = slack_directory.read_export_directory(
        slack_settings.BUNDLED_SLACK_EXPORT, slack_settings.BUNDLED_SLACK_TEAM
    )
    statuses = [a.status for a in bundled.accounts.values()]
    assert statuses.count("member") > 900 and set(statuses) <= {"member", "bot"}
    assert not [p for p in bundled.problems if "team_id" in p.reason or "is_restricted" in p.reason]

    # An export that does say (as Slack's own do) is read like the Web API: a record that lacks a flag is a guest.
    ws = workspace()
    ws.add_channel("C0SHARED", "shared", is_ext_shared=True, members=[ALICE, NOTEAM, EXT])
    ws.post("C0SHARED", {"ts": ROOT_TS, "user": ALICE, "text": "hello partners"})
    ws.write_export(tmp_path / "export")
    users_file = tmp_path / "export" / "users.json"
    users = json.loads(users_file.read_text())
    for user in users:
        if user["id"] == GUEST:
            del user["is_restricted"], user["is_ultra_restricted"]
        if user["id"] == NOTEAM:
            del user["team_id"]
    users_file.write_text(json.dumps(users))
    exported = slack_directory.read_export_directory(tmp_path / "export", TEAM)
    assert {a: exported.accounts[a].status for a in (ALICE, GUEST, NOTEAM, EXT)} == {
        ALICE: "member",
        GUEST: "guest",
        NOTEAM: "external",
        EXT: "external",
    }
    assert not exported.accounts[GUEST].groups and not exported.accounts[NOTEAM].groups
    assert sum("counted as" in p.reason for p in exported.problems) == 2
    # The export reader names a member of unknown team in the shared channel's ACL (it reads it in Slack) and
    # gives it no workspace group.
    shared = next(d for d in SlackExportReader(tmp_path / "export", TEAM).read().documents if d.container == "C0SHARED")
    assert set(shared.acl.users) == {NOTEAM, EXT} and shared.acl.groups == (MEMBERS,)


# -- Slack: one channel's members unreadable -------------------------------------------------------------------------


def test_one_channels_members_failing_keeps_them_and_applies_every_other_revocation(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    directory = DirectoryStore(tmp_path / "directory.sqlite")
    store = index_of(slack, tmp_path / "index")
    try:
        sync_directory(slack_directory.read_api_directory(reader(slack), previous=directory), directory, store)
        slack.workspace.remove_member(SECRET, BOB)
        slack.workspace.remove_member(OTHER, CAROL)
        # SECRET's member listing loops on one cursor (the paging guard trips); OTHER's reads fine.
        slack.inject("repeat_cursor", method="conversations.members", channel=SECRET, count=None)
        second = sync_directory(slack_directory.read_api_directory(reader(slack), previous=directory), directory, store)
        # OTHER's revocation is applied; SECRET keeps the members of the last sync, in the directory and the index.
        assert list(second.change.channels) == [OTHER] and second.acl_documents_updated == [OTHER_THREAD]
        assert stored_acl(store, OTHER_THREAD) == (frozenset({ALICE}), frozenset())
        assert directory.channel("slack", SECRET) == ("secret", True, (ALICE, BOB))
        assert stored_acl(store, SECRET_THREAD) == (frozenset({ALICE, BOB}), frozenset())
        (problem,) = [p for p in second.problems if SECRET in p.location]
        assert "kept the 2 member(s)" in problem.reason and "read again next sync" in problem.reason

        # Without the previous directory the channel is left out: the index keeps its threads' ACL as it is.
        third = sync_directory(slack_directory.read_api_directory(reader(slack)), directory, store)
        assert SECRET not in third.change.channels and directory.channel("slack", SECRET) is None
        assert stored_acl(store, SECRET_THREAD) == (frozenset({ALICE, BOB}), frozenset())
        assert any("no previous members known" in p.reason for p in third.problems)

        # The read that works again applies the revocation it held back.
        slack.clear_faults()
        fourth = sync_directory(slack_directory.read_api_directory(reader(slack)), directory, store)
        assert fourth.acl_documents_updated == [SECRET_THREAD]
        assert stored_acl(store, SECRET_THREAD) == (frozenset({ALICE}), frozenset())
    finally:
        store.close()


# -- Jira ------------------------------------------------------------------------------------------------------------

SITE = "jira.failclosed.test"
OPS, INTERNAL = project_group(SITE, "OPS"), security_level_group(SITE, "10001")
MODES = [pytest.param(True, id="cloud"), pytest.param(False, id="server")]


def jira_site() -> JiraSite:
    """OPS browsed by jira-devs; OPS-1 at the security level Internal, OPS-2 without a level."""
    site = JiraSite()
    site.add_user("acc-alice", "Alice", groups=["jira-devs"])
    site.add_user("acc-bob", "Bob", groups=["jira-users"])
    site.add_project("OPS", browse_groups=["jira-devs"])
    site.add_security_level("10001", "Internal", groups=["jira-devs"])
    site.add_issue(
        jira_issue("101", "OPS-1", "2024-03-02T09:00:00.000+0000", security={"id": "10001", "name": "Internal"})
    )
    site.add_issue(jira_issue("102", "OPS-2", "2024-03-02T10:00:00.000+0000"))
    return site


def jira_reader(emu: JiraEmulator, cloud: bool, resolve: bool = False) -> JiraApiReader:
    auth = (
        {"username": "bot@example.com", "api_token": "jira-test-token"}
        if cloud
        else {"personal_access_token": "jira-test-pat"}
    )
    client = build_jira_client(emu.url, cloud=cloud, stats=ApiStats(), backoff_seconds=0, max_retries=0, **auth)
    return JiraApiReader(client, JiraSyncSettings(cloud=cloud, site=SITE, resolve_permission_groups=resolve))


@pytest.mark.parametrize("resolve", [False, True], ids=["project-group", "resolved-groups"])
@pytest.mark.parametrize("cloud", MODES)
def test_an_issue_answered_without_its_security_field_is_readable_by_nobody(cloud: bool, resolve: bool) -> None:
    site = jira_site()
    site.hide_fields("security", issue="OPS-1")
    with JiraEmulator(site, cloud=cloud) as emu:
        read = jira_reader(emu, cloud, resolve).read_days("OPS", ["2024-03-02"])
        acls = {doc.metadata["key"]: doc.acl for doc in read.documents}
        assert acls["OPS-1"] == Acl()  # not the project's browsers, not anyone
        assert OPS in acls["OPS-2"].groups  # an issue Jira says has no level (null) is the project's
        (problem,) = [p for p in read.problems if "OPS-1" in p.location]
        assert "no security field" in problem.reason
        # Reconciliation would rewrite it (a moved issue): it fails the project instead, to be read again.
        with pytest.raises(JiraAccessError, match="no security field"):
            jira_reader(emu, cloud, resolve).issue_document("101")
        site.hide_fields(issue="OPS-1")
        again = jira_reader(emu, cloud, resolve).read_days("OPS", ["2024-03-02"])
    assert {doc.metadata["key"]: doc.acl.groups for doc in again.documents}["OPS-1"] == (INTERNAL,)


def test_a_dump_and_a_csv_never_show_an_unclear_level_to_the_project(tmp_path: Path) -> None:
    # A level that names no id is not read (a problem), never given to the project; null is "no level".
    for security in ({}, False, "Internal", {"self": "x"}):
        with pytest.raises(ValueError, match="security level"):
            issue_to_document(jira_issue("1", "OPS-1", "2024-03-02T09:00:00.000+0000", security=security), SITE)
    no_level = issue_to_document(jira_issue("2", "OPS-2", "2024-03-02T09:00:00.000+0000", security=None), SITE)
    assert no_level.acl.groups == (OPS,)
    dump = write_jira_dump(
        tmp_path / "dump.jsonl.gz",
        [jira_issue("3", "OPS-3", "2024-03-02T09:00:00.000+0000", security={"name": ""})],
    )
    read = JiraDumpReader(dump, SITE).read()
    assert read.documents == [] and "names no level id" in read.problems[0].reason

    # A CSV without the Security Level column cannot say which issues are restricted: readable by nobody.
    header = ["Issue key", "Issue id", "Summary", "Created", "Updated", "Project key"]
    rows = [["OPS-1", "101", "Rotate keys", "02/Mar/24 09:00", "02/Mar/24 09:00", "OPS"]]
    without = tmp_path / "current_fields.csv"
    with without.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    read = JiraCsvReader(without, SITE).read()
    assert [d.acl for d in read.documents] == [Acl()]
    assert [p.location for p in read.problems] == [str(without)] and "'Security Level'" in read.problems[0].reason
    with_column = tmp_path / "all_fields.csv"
    with with_column.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(
            [[*header, "Security Level"], [*rows[0], "Internal"], ["OPS-2", "102", "Lunch", *rows[0][3:], ""]]
        )
    read = JiraCsvReader(with_column, SITE, security_level_ids={"Internal": "10001"}).read()
    assert [d.acl.groups for d in read.documents] == [(INTERNAL,), (OPS,)] and read.problems == []


def test_an_empty_directory_page_that_promises_more_fails_the_listing() -> None:
    with JiraEmulator(jira_site()) as emu:
        emu.break_value_paging("group/member")
        with pytest.raises(GuardTripped, match="empty pages"):
            jira_directory.read_api_directory(jira_reader(emu, True))
        emu.clear_faults()
        snapshot = jira_directory.read_api_directory(jira_reader(emu, True))
    assert OPS in snapshot.accounts["acc-alice"].groups


def test_a_truncated_group_picker_is_reported() -> None:
    with JiraEmulator(jira_site(), cloud=False, group_picker_cap=1) as emu:
        snapshot = jira_directory.read_api_directory(jira_reader(emu, False))
    (problem,) = [p for p in snapshot.problems if p.location == "jira groups/picker"]
    assert problem.reason.startswith("2 groups, 1 listed")


@pytest.mark.parametrize("cloud", MODES)
def test_permission_scheme_failures_and_unresolved_grants_are_reported(cloud: bool) -> None:
    site = jira_site()
    site.projects["OPS"].other_browse_holders = [{"type": "anyone"}, {"type": "applicationRole", "parameter": "jsw"}]
    with JiraEmulator(site, cloud=cloud) as emu:
        reader = jira_reader(emu, cloud, resolve=True)
        emu.inject("403", path="/permissionscheme")
        first = reader.read_days("OPS", ["2024-03-02"])
        # Unreadable: the project group alone (which the directory grants nobody meanwhile), reported once.
        assert {d.metadata["key"]: d.acl for d in first.documents}["OPS-2"] == Acl(groups=(OPS,))
        (unreadable,) = [p for p in first.problems if "permission scheme unreadable" in p.reason]
        assert unreadable.location == "jira project OPS"
        # Not remembered across reads: the next read asks again and resolves the grants.
        second = reader.read_days("OPS", ["2024-03-02"])
        assert len(emu.calls(f"/rest/api/{3 if cloud else 2}/project/OPS/permissionscheme")) == 2
        acl = {d.metadata["key"]: d.acl for d in second.documents}["OPS-2"]
        assert acl.groups == (OPS, f"jira:{SITE}:group:jira-devs") and acl.users == ()
        dropped = sorted(p.reason.split(" is not")[0] for p in second.problems)
        assert dropped == ["Browse projects granted to anyone", "Browse projects granted to applicationRole jsw"]
        snapshot = jira_directory.read_api_directory(jira_reader(emu, cloud, resolve=True))
    assert sum("granted to" in p.reason for p in snapshot.problems) == 2
    assert OPS not in snapshot.accounts["acc-bob"].groups  # "anyone" is never turned into everyone


def test_jira_directory_reads_that_fail_keep_the_directory_or_grant_nobody(tmp_path: Path) -> None:
    """A group's member list failing fails the whole Jira sync: the previous directory stays (nobody gains or loses
    through a half read), the asset fails (reported) and the hourly sync retries. Security levels or a project's
    roles that cannot be read grant nobody and are reported; the rest of the sync applies."""
    store = DirectoryStore(tmp_path / "directory.sqlite")
    with JiraEmulator(jira_site()) as emu:
        sync_directory(jira_directory.read_api_directory(jira_reader(emu, True)), store)
        before = {a.account_id: dict(a.groups) for a in store._select("source = 'jira'", ())}
        emu.inject("503", path="/group/member", times=50)
        with pytest.raises(JiraAccessError):
            jira_directory.read_api_directory(jira_reader(emu, True))
        assert {a.account_id: dict(a.groups) for a in store._select("source = 'jira'", ())} == before
        emu.clear_faults()
        emu.inject("403", path="/issuesecurityschemes", times=50)
        emu.inject("403", path="/project/OPS/role", times=50)
        snapshot = jira_directory.read_api_directory(jira_reader(emu, True))
    holders = {g for a in snapshot.accounts.values() for g in a.groups}
    assert not any(":security:" in g or ":role:OPS:" in g for g in holders)
    assert OPS in snapshot.accounts["acc-alice"].groups  # the project's Browse grants still resolve
    locations = {p.location for p in snapshot.problems}
    assert "jira issue security schemes" in locations and "jira project OPS roles" in locations
