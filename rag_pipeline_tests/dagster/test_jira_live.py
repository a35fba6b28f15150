"""The live Jira connector: the real atlassian-python-api client against the Jira REST emulator."""

from __future__ import annotations

import json
import re
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.connectors.jira.api import JiraAccessError, JiraApiReader, JiraSyncSettings, jira_group
from rag_pipeline.connectors.jira.client import build_jira_client
from rag_pipeline.connectors.jira.dump import JiraDumpReader, issue_document_id, project_group, security_level_group
from rag_pipeline.connectors.jira.reconcile import plan_project
from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.jira.resources import JiraResource
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames, IndexedDocument, SearchFilter
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline_tests.kit import jira_fixtures as F
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraSite
from rag_pipeline_tests.kit.pipeline import cell, chain, resources, settings_for, spec

SITE = "jira.example.test"
USER, TOKEN, PAT = "bot@example.com", "jira-test-token", "jira-test-pat"
CHAIN = chain("jira")
JIRA_LIVE = spec("jira").live
jira_reconciliation, jira_project_discovery_sensor = JIRA_LIVE.reconciliation, JIRA_LIVE.discovery_sensor
MODES = [pytest.param(True, id="cloud"), pytest.param(False, id="server")]


def _reader(emu: JiraEmulator, cloud: bool = True, token: str = TOKEN, **settings) -> JiraApiReader:
    auth = {"username": USER, "api_token": token} if cloud else {"personal_access_token": PAT}
    client = build_jira_client(emu.url, cloud=cloud, stats=ApiStats(), backoff_seconds=0, **auth)
    return JiraApiReader(client, JiraSyncSettings(cloud=cloud, site=SITE, **settings))


def _doc_id(issue_id: str) -> str:
    return issue_document_id(SITE, issue_id)


@pytest.fixture
def crafted():
    with JiraEmulator(F.crafted_site()) as emu:
        yield emu


def _dump_documents(site: JiraSite, tmp: Path, api_version: int, projects=None) -> dict:
    path = site.write_dump(tmp / f"dump_v{api_version}.jsonl", api_version, projects)
    return {d.id: d for d in JiraDumpReader(path, SITE).read().documents}


# --- same documents as the dump reader -----------------------------------------------------------------------------
@pytest.mark.parametrize("cloud", MODES)
def test_api_documents_equal_dump_documents_bundled(tmp_path: Path, cloud: bool) -> None:
    site = F.bundled_site(("DAEMON", "MOD"))
    # Server: the very dump the offline demo reads; Cloud: the same issues as REST v3 serves them (ADF bodies).
    if cloud:
        expected = _dump_documents(site, tmp_path, 3)
    else:
        expected = {d.id: d for d in JiraDumpReader(F.BUNDLED_DUMP, SITE).read(["DAEMON", "MOD"]).documents}
    assert len(expected) == 54
    with JiraEmulator(site, cloud=cloud) as emu:
        reader = _reader(emu, cloud, page_size=10)
        got = {}
        for project in ("DAEMON", "MOD"):
            days = sorted({d.day for d in expected.values() if d.container == project})
            read = reader.read_days(project, days)
            assert not read.problems
            assert all(read.partition_day[d.id] == d.day for d in read.documents)
            got.update({d.id: d for d in read.documents})
        search = "/rest/api/3/search/jql" if cloud else "/rest/api/2/search"
        pages = emu.answered(search)
        assert len(pages) >= 4  # 32 DAEMON issues at 10 per page really paged
        if cloud:
            assert [r.params.get("nextPageToken") is not None for r in pages[:4]] == [False, True, True, True]
            assert not any("startAt" in r.params for r in pages)
        else:
            assert [int(r.params["startAt"]) for r in pages[:4]] == [0, 10, 20, 30]
        # Comments past what the search embeds (20) come from the paged comment endpoint.
        assert emu.answered(f"/rest/api/{3 if cloud else 2}/issue/")
    assert got == expected


def test_documents_render_adf_and_wiki_like_the_dump(crafted: JiraEmulator, tmp_path: Path) -> None:
    expected = _dump_documents(crafted.site, tmp_path, 3, ["OPS"])
    read = _reader(crafted).read_days("OPS", F.CRAFTED_DAYS)
    got = {d.id: d for d in read.documents}
    assert got == expected  # every OPS issue the dump reader builds, field for field
    assert len(got) == len(F.OPS_ISSUE_KEYS) - 1 and _doc_id(F.BAD_BODY_ID) not in got  # both report the bad body
    adf = got[_doc_id(F.ADF_ALL_ID)]
    for fragment in F.ADF_ALL_TEXTS:
        assert fragment in adf.text, fragment
    assert "[media: " in adf.text and "[x]" in adf.text and "| " in adf.text and "```" in adf.text
    assert "@Alice Anders" in adf.text  # the ADF comment's mention
    # Server/Data Center (REST v2) serves wiki markup: rendered, not kept as markup.
    with JiraEmulator(F.crafted_site(), cloud=False) as server:
        wiki = {d.id: d for d in _reader(server, cloud=False).read_days("OPS", F.CRAFTED_DAYS).documents}
    text = wiki[_doc_id(F.WIKI_ID)].text
    assert "{code" not in text and "```" in text and "kubectl rollout restart" in text
    assert wiki[_doc_id(F.ADF_ALL_ID)].text != adf.text and "Login outage" in wiki[_doc_id(F.ADF_ALL_ID)].text


# --- windows, boundaries, time zones --------------------------------------------------------------------------------
def test_day_boundaries_land_in_exactly_one_day(crafted: JiraEmulator) -> None:
    reader = _reader(crafted, overlap_minutes=0)
    late, early = _doc_id(F.BOUNDARY_LATE_ID), _doc_id(F.BOUNDARY_EARLY_ID)
    trap, after = _doc_id(F.TZ_TRAP_ID), _doc_id(F.TZ_AFTER_ID)
    day4 = reader.read_days("OPS", ["2024-03-04"])
    day5 = reader.read_days("OPS", ["2024-03-05"])
    assert late in day4.partition_day and late not in day5.partition_day
    assert early in day5.partition_day and early not in day4.partition_day
    # 07:59:30 UTC is still 03-04 in Los Angeles, but 03-05 in UTC: the partition follows UTC.
    assert trap in day5.partition_day and trap not in day4.partition_day and after in day5.partition_day
    both = reader.read_days("OPS", ["2024-03-04", "2024-03-05"])
    assert both.partition_day[late] == "2024-03-04" and both.partition_day[early] == "2024-03-05"
    # With the default overlap, one run over both days still puts each issue in exactly one partition.
    default = _reader(crafted).read_days("OPS", ["2024-03-04", "2024-03-05"])
    assert default.partition_day == both.partition_day
    assert [d.id for d in default.documents].count(late) == 1
    # JQL bounds are written in the API user's zone (PST), so Jira's minute-precision window is exact.
    jqls = [r.params["jql"] for r in crafted.answered("/rest/api/3/search/jql")]
    assert 'updated >= "2024-03-03 16:00" AND updated < "2024-03-04 16:00"' in jqls[0]
    assert crafted.answered("/rest/api/3/myself")


def test_overlap_rereads_the_end_of_the_previous_day(crafted: JiraEmulator) -> None:
    read = _reader(crafted, overlap_minutes=15).read_days("OPS", ["2024-03-05"])
    # Updated at 23:59:59.999 the day before: inside the overlap, so the run picks it up for its first day.
    assert read.partition_day[_doc_id(F.BOUNDARY_LATE_ID)] == "2024-03-05"
    assert _doc_id(F.BAD_BODY_ID) not in read.partition_day  # 12:00 the day before: outside the overlap


def test_unknown_user_zone_falls_back_to_a_padded_exact_window(tmp_path: Path) -> None:
    site = F.crafted_site(user_timezone="Pacific/Kiritimati")  # UTC+14, the far edge
    with JiraEmulator(site) as emu:
        reader = _reader(emu, overlap_minutes=0)
        reader.__dict__["user_zone"] = None  # as if `myself` had no zone
        read = reader.read_days("OPS", ["2024-03-04"])
    assert set(read.partition_day) == {_doc_id(F.BOUNDARY_LATE_ID)}  # the bad body is a problem, not a document
    assert len(read.problems) == 1


@pytest.mark.parametrize("cloud", MODES)
def test_request_paths_of_a_partition_read(cloud: bool) -> None:
    with JiraEmulator(F.crafted_site(), cloud=cloud) as emu:
        _reader(emu, cloud).read_days("OPS", ["2024-03-06"])
        requests = [(r.method, r.path) for r in emu.requests]
        search = emu.requests[1]
    v = 3 if cloud else 2
    assert requests == [
        ("GET", f"/rest/api/{v}/myself"),
        ("GET", f"/rest/api/{v}/search/jql" if cloud else "/rest/api/2/search"),
        *[("GET", f"/rest/api/{v}/issue/{F.HUGE_THREAD_ID}/comment")] * 3,
    ]
    assert set(search.params["fields"].split(",")) >= {"summary", "description", "comment", "updated", "issuelinks"}
    assert search.auth == ("basic:bot@example.com" if cloud else "bearer")


def test_ambiguous_wall_clock_bounds_are_widened() -> None:
    # 2024-10-27 00:00 UTC is 03:00 in Helsinki, an hour that happens twice as clocks go back.
    site = F.crafted_site(user_timezone="Europe/Helsinki")
    with JiraEmulator(site) as emu:
        _reader(emu, overlap_minutes=0).read_days("OPS", ["2024-10-26"])
        _reader(emu, overlap_minutes=0).read_days("OPS", ["2024-03-04"])
        jqls = [r.params["jql"] for r in emu.answered("/rest/api/3/search/jql")]
    # The end bound moves past both readings of 03:00; an unambiguous bound (March) stays exact.
    assert 'updated >= "2024-10-26 03:00" AND updated < "2024-10-27 05:00"' in jqls[0]
    assert 'updated >= "2024-03-04 02:00" AND updated < "2024-03-05 02:00"' in jqls[1]


def _edit_after_first_page(reader: JiraApiReader, cloud: bool, edit) -> None:
    name = "enhanced_jql" if cloud else "jql"
    search, pages = getattr(reader.client, name), []

    def searched(*args, **kwargs):
        page = search(*args, **kwargs)
        pages.append(page)
        if len(pages) == 1:
            edit(page["issues"])
        return page

    setattr(reader.client, name, searched)


@pytest.mark.parametrize("cloud", MODES)
def test_an_issue_edited_while_paging_does_not_hide_another(cloud: bool) -> None:
    site = F.bundled_site(("DAEMON",))
    days = sorted({i["fields"]["updated"][:10] for i in site.issues.values()})
    from rag_pipeline.sources.days import days_between

    window = days_between(days[0], days[-1])
    with JiraEmulator(site, cloud=cloud) as emu:
        clean = {d.id for d in _reader(emu, cloud, page_size=10).read_days("DAEMON", window).documents}
        reader = _reader(emu, cloud, page_size=10)
        edited: list[str] = []

        def edit(first_page: list[dict]) -> None:
            # Someone edits an issue of page 1 now: it moves behind the cursor (out of this window).
            edited.append(first_page[0]["id"])
            site.set_field(edited[0], "updated", "2030-01-01T00:00:00.000+0000")

        _edit_after_first_page(reader, cloud, edit)
        got = {d.id for d in reader.read_days("DAEMON", window).documents}
    # Nothing untouched goes missing (the edited issue was read before its edit; the next run gets the edit).
    assert got == clean and len(got) == 32


def test_a_comment_deleted_while_paging_does_not_hide_another(crafted: JiraEmulator) -> None:
    reader = _reader(crafted, comment_page_size=100)
    get, calls = reader._get, []

    def get_then_delete(what, where, resource, **params):
        page = get(what, where, resource, **params)
        calls.extend([resource] if resource.endswith("/comment") else [])
        if len(calls) == 1 and resource.endswith("/comment"):
            with crafted.site.lock:
                thread = crafted.site.issues[F.HUGE_THREAD_ID]["fields"]["comment"]["comments"]
                thread.sort(key=lambda c: c["created"])
                del thread[0]
        return page

    reader._get = get_then_delete
    doc = {d.id: d for d in reader.read_days("OPS", ["2024-03-06"]).documents}[_doc_id(F.HUGE_THREAD_ID)]
    numbers = [int(n) for n in re.findall(r"comment number (\d+)", doc.text)]
    assert numbers == list(range(2, F.HUGE_THREAD_COMMENTS + 1))


def test_transport_failure_on_comments_fails_the_project_not_the_issue() -> None:
    with JiraEmulator(F.crafted_site()) as emu:
        emu.inject("503", path="/comment", times=10)
        client = build_jira_client(emu.url, username=USER, api_token=TOKEN, max_retries=2, backoff_seconds=0)
        with pytest.raises(JiraAccessError) as failed:
            JiraApiReader(client, JiraSyncSettings(site=SITE)).read_days("OPS", ["2024-03-06"])
    assert "read comments" in str(failed.value) and "OPS-6" in str(failed.value)


# --- comments, links, ACL, bad bodies -------------------------------------------------------------------------------
@pytest.mark.parametrize("cloud", MODES)
def test_every_comment_is_paged_in(cloud: bool) -> None:
    with JiraEmulator(F.crafted_site(), cloud=cloud, embed_comments=20, comment_page_cap=100) as emu:
        read = _reader(emu, cloud, comment_page_size=100).read_days("OPS", ["2024-03-06"])
        pages = emu.answered(f"/rest/api/{3 if cloud else 2}/issue/{F.HUGE_THREAD_ID}/comment")
    doc = {d.id: d for d in read.documents}[_doc_id(F.HUGE_THREAD_ID)]
    assert doc.metadata["comment_count"] == F.HUGE_THREAD_COMMENTS
    numbers = [int(n) for n in re.findall(r"comment number (\d+)", doc.text)]
    assert numbers == list(range(1, F.HUGE_THREAD_COMMENTS + 1))  # every comment, once, in order
    assert [int(r.params["startAt"]) for r in pages] == [0, 100, 200]


@pytest.mark.parametrize("resolve", [False, True], ids=["project-group", "resolved-groups"])
def test_restricted_comments_are_their_own_documents_under_both_acls(resolve: bool) -> None:
    """A comment restricted to a role or a group stays out of the issue's text and becomes its own document whose
    ACL is the issue's readers *and* the restriction (kept when the project's Browse groups are resolved); a
    restriction naming nothing checkable is dropped, as before."""
    site = F.crafted_site()
    thread = site.issues[F.WIKI_ID]["fields"]["comment"]["comments"]
    thread.append({**thread[0], "id": "99", "body": "internal only: customer is Acme",
                   "visibility": {"type": "role", "value": "Administrators"}})  # fmt: skip
    thread.append({**thread[0], "id": "100", "body": "payroll is handled by Globex",
                   "visibility": {"type": "group", "value": "hr-team"}})  # fmt: skip
    thread.append({**thread[0], "id": "101", "body": "no name: Initech", "visibility": {"type": "group"}})
    with JiraEmulator(site) as emu:
        read = _reader(emu, resolve_permission_groups=resolve).read_days("OPS", ["2024-03-08"])
    docs = {d.id: d for d in read.documents}
    issue = docs[_doc_id(F.WIKI_ID)]
    assert not any(secret in issue.text for secret in ("Acme", "Globex", "Initech"))
    assert issue.metadata["comment_count"] == len(thread) - 3
    assert issue.metadata["restricted_comments"] == 2 and issue.metadata["restricted_comments_dropped"] == 1
    role_comment, group_comment = docs[f"{_doc_id(F.WIKI_ID)}:comment-99"], docs[f"{_doc_id(F.WIKI_ID)}:comment-100"]
    assert issue.metadata["family"] == [role_comment.id, group_comment.id]
    assert "Acme" in role_comment.text and role_comment.text.startswith(issue.title)
    assert role_comment.acl.groups == issue.acl.groups  # the issue's readers (resolved or not) ...
    assert role_comment.acl.restricted_to == (f"jira:{SITE}:role:OPS:Administrators",)  # ... and the role
    assert group_comment.acl.restricted_to == (jira_group(SITE, "hr-team"),)
    assert role_comment.version == issue.version and read.partition_day[role_comment.id] == "2024-03-08"
    assert role_comment.metadata["belongs_to"] == issue.id and "focusedCommentId=99" in (role_comment.url or "")
    assert not any("Initech" in d.text for d in read.documents)
    # Who may read it: a project reader holding the role, not a project reader without it, not the role alone.
    project = set(issue.acl.groups)
    assert role_comment.acl.admits(None, project | {f"jira:{SITE}:role:OPS:Administrators"})
    assert not role_comment.acl.admits(None, project)
    assert not role_comment.acl.admits(None, {f"jira:{SITE}:role:OPS:Administrators"})


def test_links_security_levels_and_bad_bodies(crafted: JiraEmulator) -> None:
    reader = _reader(crafted)
    ops = reader.read_days("OPS", F.CRAFTED_DAYS)
    sec = reader.read_days("SEC", F.CRAFTED_DAYS)
    docs = {d.id: d for d in ops.documents + sec.documents}
    duplicate = docs[_doc_id(F.LINKED_DUPLICATE_ID)].metadata["links"]
    assert {"type": "Duplicate", "direction": "outward", "relation": "duplicates", "key": F.LINKED_ORIGINAL_KEY,
            "id": F.LINKED_ORIGINAL_ID} in duplicate  # fmt: skip
    assert {(link["type"], link["direction"]) for link in duplicate} == {("Duplicate", "outward"), ("Blocks", "inward")}
    secure = docs[_doc_id(F.SECURE_ID)]
    assert secure.acl.groups == (security_level_group(SITE, F.SECURITY_LEVEL["id"]),)
    assert docs[_doc_id(F.WIKI_ID)].acl.groups == (project_group(SITE, "OPS"),)
    # One bad body is reported by key and never costs the rest of the partition.
    assert [p.location for p in ops.problems] == [f"jira issue {F.BAD_BODY_KEY} (id {F.BAD_BODY_ID})"]
    assert "unsupported Jira body type int" in ops.problems[0].reason
    assert len(ops.documents) == len(F.OPS_ISSUE_KEYS) - 1


def test_permission_scheme_groups_and_role_actors_join_the_acl(crafted: JiraEmulator) -> None:
    reader = _reader(crafted, resolve_permission_groups=True)
    docs = {d.id: d for d in reader.read_days("OPS", ["2024-03-08"]).documents}
    acl = docs[_doc_id(F.WIKI_ID)].acl
    assert set(acl.groups) == {
        project_group(SITE, "OPS"),
        *(jira_group(SITE, g) for g in F.OPS_BROWSE_GROUPS + F.OPS_ROLE_GROUPS),
    }
    assert acl.users == F.OPS_ROLE_USERS
    assert len(crafted.answered("/rest/api/3/project/OPS/permissionscheme")) == 1  # once per reader
    # A security level still restricts: the project's browsers do not all qualify.
    secure = {d.id: d for d in reader.read_days("SEC", F.CRAFTED_DAYS).documents}[_doc_id(F.SECURE_ID)]
    assert secure.acl.groups == (security_level_group(SITE, F.SECURITY_LEVEL["id"]),)


# --- retries and errors ---------------------------------------------------------------------------------------------
def test_retry_after_is_honoured() -> None:
    import time

    with JiraEmulator(F.crafted_site()) as emu:
        emu.inject("429", path="/search/jql", times=1, retry_after=1)
        reader = _reader(emu)
        started = time.perf_counter()
        reader.read_days("OPS", ["2024-03-04"])
        assert time.perf_counter() - started >= 1.0
    assert reader.stats.retries == {"http_429": 1}


def test_retries_converge_to_the_fault_free_result() -> None:
    with JiraEmulator(F.crafted_site()) as emu:
        clean = _reader(emu).read_days("OPS", F.CRAFTED_DAYS)
    with JiraEmulator(F.crafted_site()) as emu:
        emu.inject("429", path="/search/jql", times=3, retry_after=0)
        emu.inject("500", path="/comment", times=1)
        emu.inject("503", path="/search/jql", times=1)
        emu.inject("drop", path="/comment", times=1)
        reader = _reader(emu)
        faulty = reader.read_days("OPS", F.CRAFTED_DAYS)
        assert emu.pending_faults() == 0
        statuses = [r.status for r in emu.requests]
    assert {d.id: d for d in faulty.documents} == {d.id: d for d in clean.documents}
    assert statuses.count(429) == 3 and statuses.count(500) == 1 and statuses.count(503) == 1
    assert reader.stats.retries == {"http_429": 3, "http_500": 1, "http_503": 1, "connection": 1}


def test_errors_name_the_fault_and_never_the_secret(crafted: JiraEmulator) -> None:
    with pytest.raises(JiraAccessError) as bad_token:
        _reader(crafted, token="wrong-secret-token").read_days("OPS", ["2024-03-04"])
    assert "401" in str(bad_token.value) and "JIRA_API_TOKEN" in str(bad_token.value)
    assert "wrong-secret-token" not in str(bad_token.value)
    # A Cloud site read with the Server search: 410, naming the removed endpoint and the fix.
    client = build_jira_client(crafted.url, username=USER, api_token=TOKEN, cloud=False, backoff_seconds=0)
    with pytest.raises(JiraAccessError) as gone:
        JiraApiReader(client, JiraSyncSettings(cloud=False, site=SITE)).read_days("OPS", ["2024-03-04"])
    assert "410" in str(gone.value) and "/rest/api/2/search" in str(gone.value) and "search/jql" in str(gone.value)
    with pytest.raises(JiraAccessError) as hidden:
        _reader(crafted).read_days("HID", ["2024-03-03"])
    assert "project HID" in str(hidden.value) and "cannot browse" in str(hidden.value)
    crafted.inject("404", path="/search/jql")
    with pytest.raises(JiraAccessError) as not_found:
        _reader(crafted).read_days("OPS", ["2024-03-04"])
    assert "404" in str(not_found.value) and "/rest/api/3/search/jql" in str(not_found.value)
    crafted.inject("403", path="/search/jql")
    with pytest.raises(JiraAccessError) as forbidden:
        _reader(crafted).read_days("OPS", ["2024-03-04"])
    assert "403" in str(forbidden.value) and "project OPS" in str(forbidden.value)


# --- discovery ------------------------------------------------------------------------------------------------------
def test_discovery_pages_and_filters_projects() -> None:
    with JiraEmulator(F.crafted_site(), project_page_size=1) as emu:
        assert [p.key for p in _reader(emu).discover_projects()] == ["NEW", "OPS", "SEC"]
        assert len(emu.answered("/rest/api/3/project/search")) == 3  # one page per project, nextPage followed
        assert [p.key for p in _reader(emu, include_archived=True).discover_projects()] == ["NEW", "OLD", "OPS", "SEC"]
        assert [p.key for p in _reader(emu, project_deny=("S.*",)).discover_projects()] == ["NEW", "OPS"]
        assert [p.key for p in _reader(emu, project_allow=("OPS",)).discover_projects()] == ["OPS"]


def _indexed(docs) -> dict[str, IndexedDocument]:
    return {d.id: IndexedDocument(d.id, d.version, d.content_hash) for d in docs}


def test_reconciliation_plans_for_unsynced_targets_and_vanished_projects(crafted: JiraEmulator) -> None:
    reader = _reader(crafted, project_deny=("NEW",))
    ops = _indexed(reader.read_days("OPS", F.CRAFTED_DAYS).documents)
    sec = _indexed(reader.read_days("SEC", F.CRAFTED_DAYS).documents)
    crafted.site.move_issue(F.MOVED_ID, "NEW", F.MOVED_NEW_KEY, F.MOVE_UPDATED)
    # Moved into a project the connector does not sync: nothing would ever reconcile it there.
    plan = plan_project(reader, "OPS", ops)
    assert plan.remove == [_doc_id(F.MOVED_ID)] and not plan.rewrite and plan.checked == len(ops)
    assert plan_project(_reader(crafted), "OPS", ops).rewrite[0].container == "NEW"  # synced target: rewritten
    # A project the API user can no longer see takes its documents with it.
    crafted.site.projects["SEC"].visible = False
    assert plan_project(reader, "SEC", sec).remove == sorted(sec)
    # A project that still exists but cannot be listed right now fails, removing nothing.
    crafted.site.projects["SEC"].visible = True
    crafted.inject("503", path="/search/jql", times=20)
    failing = JiraApiReader(
        build_jira_client(crafted.url, username=USER, api_token=TOKEN, max_retries=1, backoff_seconds=0),
        JiraSyncSettings(site=SITE),
    )
    with pytest.raises(JiraAccessError):
        plan_project(failing, "SEC", sec)


def test_reconciliation_takes_an_issues_restricted_comments_with_it() -> None:
    """A restricted comment is reconciled through its issue: removed with a deleted issue, removed (to be written
    again under the new project's readers) when the issue moves, and never looked up by itself."""
    site = F.crafted_site()
    for issue_id in (F.MOVED_ID, F.WIKI_ID):
        thread = site.issues[issue_id]["fields"].setdefault("comment", {"comments": []})["comments"]
        thread.append({"id": f"7{issue_id}", "author": {"displayName": "Lee"}, "body": "role only",
                       "created": "2024-03-02T09:40:00.000+0000",
                       "visibility": {"type": "role", "value": "Developers"}})  # fmt: skip
    with JiraEmulator(site) as emu:
        reader = _reader(emu)
        ops = _indexed(reader.read_days("OPS", F.CRAFTED_DAYS).documents)
        moved, wiki = _doc_id(F.MOVED_ID), _doc_id(F.WIKI_ID)
        assert f"{moved}:comment-7{F.MOVED_ID}" in ops and f"{wiki}:comment-7{F.WIKI_ID}" in ops
        emu.site.move_issue(F.MOVED_ID, "NEW", F.MOVED_NEW_KEY, F.MOVE_UPDATED)
        emu.site.delete_issue(F.WIKI_ID)
        plan = plan_project(reader, "OPS", ops)
        looked_up = [r.path for r in emu.requests if "/issue/" in r.path and "comment-" in r.path]
    assert [d.id for d in plan.rewrite] == [moved] and plan.rewrite[0].container == "NEW"
    assert sorted(plan.remove) == sorted([f"{moved}:comment-7{F.MOVED_ID}", wiki, f"{wiki}:comment-7{F.WIKI_ID}"])
    assert not looked_up


def _live_resources(data_dir: Path, emu: JiraEmulator, **overrides) -> dict:
    res = resources(data_dir, live=False)
    jira = JiraResource(url=emu.url, username=USER, api_token=TOKEN, site=SITE, backoff_seconds=0, **overrides)
    res["jira"] = res["jira_source"] = jira
    return res


def test_discovery_sensor_adds_projects_and_leaves_their_runs_to_the_sync_sensor(
    crafted: JiraEmulator, tmp_path: Path
) -> None:
    with dg.instance_for_test() as instance:
        res = _live_resources(tmp_path, crafted, project_deny=["NEW"])
        result = jira_project_discovery_sensor(
            dg.build_sensor_context(instance=instance, resources={"jira": res["jira"]})
        )
        added = result.dynamic_partitions_requests[0].partition_keys
        assert sorted(added) == ["OPS", "SEC"]
        assert not result.run_requests  # jira_sync_sensor requests their initial history
        instance.add_dynamic_partitions("jira_projects", added)
        again = jira_project_discovery_sensor(
            dg.build_sensor_context(instance=instance, resources={"jira": res["jira"]})
        )
        assert not again.run_requests and not again.dynamic_partitions_requests


# --- through Dagster ------------------------------------------------------------------------------------------------
def _store(data_dir: Path) -> EdgeVectorStore:
    return EdgeVectorStore(data_dir / "qdrant", CollectionNames.with_prefix("rag"))


def test_materialize_partitions_then_reconcile_deletions_and_moves(crafted: JiraEmulator, tmp_path: Path) -> None:
    site = crafted.site
    res = _live_resources(tmp_path, crafted, overlap_minutes=0)
    moved, deleted = _doc_id(F.MOVED_ID), _doc_id(F.DELETED_ID)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("jira_projects", ["OPS", "NEW"])
        for day in ("2024-03-07", "2024-03-04", "2024-03-09", "2024-03-10"):
            result = dg.materialize(CHAIN, instance=instance, resources=res, **cell("jira_issues", "OPS", day))
            assert result.success
        raw = {k: v.value for k, v in result.asset_materializations_for_node("jira_issues")[0].metadata.items()}
        assert TOKEN not in json.dumps({k: str(v) for k, v in raw.items()})
        assert raw["documents"] == 1 and raw["api_calls_by_method"]["GET /rest/api/3/search/jql"] == 1
        first = dg.materialize(CHAIN, instance=instance, resources=res, **cell("jira_issues", "OPS", "2024-03-04"))
        bad = {k: v.value for k, v in first.asset_materializations_for_node("jira_issues")[0].metadata.items()}
        assert bad["bad_records"] == 1 and F.BAD_BODY_KEY in bad["bad_record_examples"]
        with _store(tmp_path) as store:
            before = store.indexed_documents(SearchFilter(containers=("OPS",)))
            # Typed links are payload: "which issues duplicate OPS-8?" is a filter.
            duplicates = store.indexed_documents(SearchFilter(extra={"links": f"duplicates:{F.LINKED_ORIGINAL_KEY}"}))
            blocking = store.indexed_documents(SearchFilter(extra={"link_types": "Blocks"}))
            # The resolution is payload too (a rerank feature): Jira's name, "Unresolved" for an open issue.
            closed_as_duplicate = store.indexed_documents(SearchFilter(extra={"resolution": "Duplicate"}))
            open_original = store.indexed_documents(SearchFilter(extra={"resolution": "Unresolved"}))
        assert set(duplicates) == {_doc_id(F.LINKED_DUPLICATE_ID)}
        assert set(closed_as_duplicate) == {_doc_id(F.LINKED_DUPLICATE_ID)}
        assert _doc_id(F.LINKED_ORIGINAL_ID) in open_original
        assert set(blocking) == {_doc_id(i) for i in F.LINKED_IDS}
        assert {moved, deleted, _doc_id(F.BOUNDARY_LATE_ID)} <= set(before)

        site.delete_issue(F.DELETED_ID)
        site.move_issue(F.MOVED_ID, "NEW", F.MOVED_NEW_KEY, F.MOVE_UPDATED)
        rec = dg.materialize(
            [jira_reconciliation],
            instance=instance,
            resources=res,
            run_config={"ops": {"jira_reconciliation": {"config": {"projects": ["OPS"]}}}},
        )
        assert rec.success
        meta = {k: v.value for k, v in rec.asset_materializations_for_node("jira_reconciliation")[0].metadata.items()}
        assert meta["documents_removed"] == 1 and meta["documents_rewritten"] == 1
        with _store(tmp_path) as store:
            ops_after = store.indexed_documents(SearchFilter(containers=("OPS",)))
            new_after = store.indexed_documents(SearchFilter(containers=("NEW",)))
            everywhere = store.indexed_documents(SearchFilter(sources=("jira",)))
            refs = store.document_points(store.names.parents, [moved])
            texts = [h.payload for h in store.retrieve(store.names.parents, [r.id for r in refs])]
        assert deleted not in everywhere and moved not in ops_after
        assert set(new_after) == {moved}  # moved: one document under its new project, no duplicate
        assert texts and all(p["container"] == "NEW" and F.MOVED_NEW_KEY in p["text"] for p in texts)
        assert set(ops_after) == set(before) - {moved, deleted}
        assert all(ops_after[d] == before[d] for d in ops_after)


def test_sync_command_json_and_one_failing_project(crafted: JiraEmulator, tmp_path: Path, monkeypatch, capsys) -> None:
    from rag_pipeline.cli import main

    for name, value in {"JIRA_URL": crafted.url, "JIRA_USERNAME": USER, "JIRA_API_TOKEN": TOKEN, "JIRA_SITE": SITE,
                        "DAGSTER_HOME": str(tmp_path / "home")}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    (tmp_path / "home").mkdir()
    crafted.inject("403", path="/search/jql", times=1, match="SEC")  # SEC is refused
    code = main(
        ["sync", "--source", "jira", "--start", "2024-03-01", "--end", "2024-03-12", "--data-dir", str(tmp_path),
         "--project", "SEC", "--project", "OPS", "--json"]
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert set(out["failed"]) == {"SEC"} and "403" in out["failed"]["SEC"]
    ops = {d.id for d in _reader(crafted).read_days("OPS", [f"2024-03-{d:02d}" for d in range(1, 13)]).documents}
    assert out["documents"] == len(ops) == len(F.OPS_ISSUE_KEYS) - 1  # ... OPS is complete
    assert out["documents_updated"] == len(ops) and out["documents_removed"] == 0
    assert out["api_calls"] > 0 and out["retries"] == 0 and TOKEN not in json.dumps(out)
    with _store(tmp_path) as store:
        assert set(store.indexed_documents(SearchFilter(containers=("OPS",)))) == ops

    missing = main(
        ["sync", "--source", "jira", "--start", "2024-03-01", "--data-dir", str(tmp_path), "--project", "NOPE"]
    )
    assert missing == 2 and "NOPE" in capsys.readouterr().err


def test_live_jira_definitions_only_with_a_url(monkeypatch) -> None:
    monkeypatch.delenv("JIRA_URL", raising=False)
    offline = build_definitions(settings_for())
    assert not offline.resolve_asset_graph().has(dg.AssetKey("jira_reconciliation"))
    assert offline.resources["jira_source"] is offline.resources["jira_dump"]
    monkeypatch.setenv("JIRA_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("JIRA_USERNAME", USER)
    monkeypatch.setenv("JIRA_API_TOKEN", TOKEN)
    live = build_definitions(settings_for())
    dg.Definitions.validate_loadable(live)
    graph = live.resolve_asset_graph()
    assert graph.get(dg.AssetKey("jira_reconciliation")).pools == {"qdrant"}
    assert graph.get(dg.AssetKey("jira_issues")).pools == {"jira_api"}
    assert live.resolve_schedule_def("jira_reconciliation_schedule").cron_schedule == "30 3 * * *"
    assert live.resolve_sensor_def("jira_project_discovery_sensor") is not None
    jira = live.resources["jira"]
    assert live.resources["jira_source"] is jira and jira.cloud
    # The token stays an environment variable in the resource config, never a literal.
    assert isinstance(jira.api_token, dg.EnvVar) and jira.api_token.env_var_name == "JIRA_API_TOKEN"
