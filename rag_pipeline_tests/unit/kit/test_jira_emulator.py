"""The Jira REST emulator, driven by the real ``atlassian.Jira`` client (atlassian-python-api 5.x): Cloud token
paging and the 410 of the old search, Server startAt paging, JQL dates in the user's timezone, ORDER BY, project
paging with absolute ``nextPage`` URLs, comment paging, ACLs, moves and deletions, fault injection with the client's
retries, auth, and v2/v3 bodies."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from atlassian import Jira
from requests import HTTPError

from rag_pipeline_tests.kit import jira_fixtures as fx
from rag_pipeline_tests.kit.emulators.jira_api import GONE_MESSAGE, JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import (
    JiraSite,
    adf_to_text,
    body_for_version,
    parse_jira_time,
    text_to_adf,
)

USER = "bot@example.com"
TOKEN = "jira-test-token"
PAT = "jira-test-pat"
NO_WAIT = {"backoff_and_retry": True, "retry_status_codes": [429, 500, 503], "backoff_factor": 0, "backoff_jitter": 0}


@pytest.fixture
def site() -> JiraSite:
    return fx.crafted_site()


@pytest.fixture
def emu(site: JiraSite) -> Iterator[JiraEmulator]:
    with JiraEmulator(site) as emulator:
        yield emulator


@pytest.fixture
def server_emu(site: JiraSite) -> Iterator[JiraEmulator]:
    with JiraEmulator(site, cloud=False) as emulator:
        yield emulator


def cloud_client(emu: JiraEmulator, *, password: str = TOKEN, api_version: str = "3", **kwargs: Any) -> Jira:
    return Jira(url=emu.url, username=USER, password=password, cloud=True, api_version=api_version, timeout=5, **kwargs)


def server_client(emu: JiraEmulator, **kwargs: Any) -> Jira:
    return Jira(url=emu.url, username=USER, password=TOKEN, cloud=False, timeout=5, **kwargs)


def search_keys(jira: Jira, jql: str) -> list[str]:
    """Every key a Cloud search returns, following nextPageToken."""
    return [issue["key"] for issue in jira.enhanced_jql_get_list_of_tickets(jql, fields="key,updated")]


def adf_types(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*(adf_types(n) for n in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["type"]} if "type" in node else set()
    for mark in node.get("marks", ()):
        found.add(f"mark:{mark['type']}")
    return found | adf_types(node.get("content", []))


# -- fixtures ---------------------------------------------------------------------------------------------------------


def test_crafted_site_is_as_documented(site: JiraSite) -> None:
    assert set(site.projects) == {"OPS", "SEC", "NEW", "OLD", "HID"}
    assert [site.projects[k].id for k in ("OPS", "SEC", "NEW", "OLD", "HID")] == [
        fx.OPS_PROJECT_ID,
        fx.SEC_PROJECT_ID,
        fx.NEW_PROJECT_ID,
        fx.OLD_PROJECT_ID,
        fx.HID_PROJECT_ID,
    ]
    assert site.projects["OLD"].archived and not site.projects["HID"].visible
    for issue_id, key, updated in [
        (fx.BOUNDARY_LATE_ID, fx.BOUNDARY_LATE_KEY, fx.BOUNDARY_LATE_UPDATED),
        (fx.BOUNDARY_EARLY_ID, fx.BOUNDARY_EARLY_KEY, fx.BOUNDARY_EARLY_UPDATED),
        (fx.TZ_TRAP_ID, fx.TZ_TRAP_KEY, fx.TZ_TRAP_UPDATED),
        (fx.TZ_AFTER_ID, fx.TZ_AFTER_KEY, fx.TZ_AFTER_UPDATED),
        (fx.ADF_ALL_ID, fx.ADF_ALL_KEY, fx.ADF_ALL_UPDATED),
        (fx.HUGE_THREAD_ID, fx.HUGE_THREAD_KEY, fx.HUGE_THREAD_UPDATED),
        (fx.WIKI_ID, fx.WIKI_KEY, fx.WIKI_UPDATED),
        (fx.MOVED_ID, fx.MOVED_KEY, fx.MOVED_UPDATED),
        (fx.DELETED_ID, fx.DELETED_KEY, fx.DELETED_UPDATED),
        (fx.BAD_BODY_ID, fx.BAD_BODY_KEY, fx.BAD_BODY_UPDATED),
        (fx.SECURE_ID, fx.SECURE_KEY, fx.SECURE_UPDATED),
        (fx.ARCHIVED_ISSUE_ID, fx.ARCHIVED_ISSUE_KEY, fx.ARCHIVED_ISSUE_UPDATED),
        (fx.HIDDEN_ISSUE_ID, fx.HIDDEN_ISSUE_KEY, fx.HIDDEN_ISSUE_UPDATED),
    ]:
        issue = site.issue(key)
        assert issue is not None and issue["id"] == issue_id and issue["fields"]["updated"] == updated
    march = (datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 4, 1, tzinfo=UTC))
    for issue in site.issues.values():
        fields = issue["fields"]
        assert march[0] <= parse_jira_time(fields["updated"]) < march[1]
        assert parse_jira_time(fields["created"]) <= parse_jira_time(fields["updated"])
        assert fields["project"]["id"] == site.projects[fields["project"]["key"]].id
        for comment in fields["comment"]["comments"]:
            assert parse_jira_time(comment["created"]) <= parse_jira_time(fields["updated"])
    searchable = [i for i in site.issues.values() if i["fields"]["project"]["key"] in ("OPS", "SEC")]
    assert sorted(i["id"] for i in searchable) == sorted(fx.SEARCHABLE_ISSUE_IDS)
    days = {parse_jira_time(i["fields"]["updated"]).strftime("%Y-%m-%d") for i in searchable}
    assert tuple(sorted(days)) == fx.CRAFTED_DAYS

    huge = site.issue(fx.HUGE_THREAD_KEY)["fields"]["comment"]["comments"]
    assert [c["body"] for c in huge] == [f"comment number {i}" for i in range(1, 251)]
    assert len({c["author"]["accountId"] for c in huge[:2]}) == 2
    assert [c["created"] for c in huge] == sorted(c["created"] for c in huge)
    required = {
        "doc", "paragraph", "text", "hardBreak", "heading", "bulletList", "orderedList", "listItem", "codeBlock",
        "blockquote", "panel", "rule", "table", "tableRow", "tableHeader", "tableCell", "mention", "emoji",
        "inlineCard", "blockCard", "media", "mediaSingle", "mediaGroup", "status", "date", "expand", "nestedExpand",
        "decisionList", "decisionItem", "taskList", "taskItem", "futureWidget", "mark:strong", "mark:em",
        "mark:code", "mark:strike", "mark:link",
    }  # fmt: skip
    assert required <= adf_types(site.issue(fx.ADF_ALL_KEY)["fields"]["description"])
    assert adf_types(site.issue(fx.ADF_ALL_KEY)["fields"]["comment"]["comments"][0]["body"]) >= {"doc", "mention"}
    duplicate, original = (site.issue(k)["fields"]["issuelinks"] for k in fx.LINKED_KEYS)
    assert {(link["type"]["name"], "outwardIssue" in link) for link in duplicate} == {
        ("Duplicate", True),
        ("Blocks", False),
    }
    assert {(link["type"]["name"], "outwardIssue" in link) for link in original} == {
        ("Duplicate", False),
        ("Blocks", True),
    }
    assert site.issue(fx.SECURE_KEY)["fields"]["security"] == fx.SECURITY_LEVEL
    assert site.issue(fx.BAD_BODY_KEY)["fields"]["description"] == 12345


def test_bundled_and_synthetic_sites() -> None:
    bundled = fx.bundled_site()
    counts: dict[str, int] = {}
    for issue in bundled.issues.values():
        counts[issue["fields"]["project"]["key"]] = counts.get(issue["fields"]["project"]["key"], 0) + 1
    assert counts == {"DAEMON": fx.BUNDLED_PROJECT_COUNTS["DAEMON"], "MOD": fx.BUNDLED_PROJECT_COUNTS["MOD"]}
    assert len(fx.bundled_site(("AC",), limit_per_project=7).issues) == 7

    synth = fx.synthetic_site(projects=2, days=5, issues_per_day=3, comments_per_issue=2, seed=1)
    assert len(synth.issues) == 2 * 5 * 3
    assert sorted(synth.projects) == ["P1", "P2"]
    assert [i["key"] for i in synth.issues.values() if i["key"].startswith("P1-")] == [f"P1-{n}" for n in range(1, 16)]
    for issue in synth.issues.values():
        fields = issue["fields"]
        created, updated = parse_jira_time(fields["created"]), parse_jira_time(fields["updated"])
        assert created < updated and created.date() == updated.date()
        assert datetime(2024, 1, 1, tzinfo=UTC) <= created < datetime(2024, 1, 6, tzinfo=UTC)
        assert len(fields["comment"]["comments"]) == 2
        assert all(created < parse_jira_time(c["created"]) < updated for c in fields["comment"]["comments"])
        assert fields["summary"]
    again = fx.synthetic_site(projects=2, days=5, issues_per_day=3, comments_per_issue=2, seed=1)
    assert again.issues == synth.issues


def test_write_dump_round_trip(site: JiraSite, tmp_path: Path) -> None:
    path = site.write_dump(tmp_path / "dump.jsonl.gz", 2, project_keys=["OPS"])
    loaded = JiraSite.from_dump(path)
    assert sorted(loaded.issues) == sorted(i for i in fx.SEARCHABLE_ISSUE_IDS if i != fx.SECURE_ID)
    for issue_id in loaded.issues:
        assert loaded.issue_view(issue_id, 2) == site.issue_view(issue_id, 2)
    assert loaded.issue(fx.BAD_BODY_KEY)["fields"]["description"] == 12345
    assert loaded.issue(fx.ADF_ALL_KEY)["fields"]["description"] == adf_to_text(fx.ADF_ALL_DOC)
    v3 = JiraSite.from_dump(site.write_dump(tmp_path / "v3.jsonl", 3), projects=["OPS"], limit_per_project=2)
    assert [i["key"] for i in v3.issues.values()] == ["OPS-1", "OPS-2"]
    assert v3.issue("OPS-1")["fields"]["description"]["type"] == "doc"


def test_body_for_version() -> None:
    wiki = "h2. Title\r\n\r\nline one\nline two\n\n\n  \nlast *bold*"
    assert body_for_version(wiki, 2) == wiki
    assert body_for_version(wiki, 3) == {
        "type": "doc",
        "version": 1,
        "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": "h2. Title"}]},
            {
                "type": "paragraph",
                "content": [
                    {"type": "text", "text": "line one"},
                    {"type": "hardBreak"},
                    {"type": "text", "text": "line two"},
                ],
            },
            {"type": "paragraph", "content": [{"type": "text", "text": "last *bold*"}]},
        ],
    }
    assert body_for_version(fx.ADF_ALL_DOC, 3) == fx.ADF_ALL_DOC
    assert body_for_version(fx.ADF_ALL_DOC, 3) is not fx.ADF_ALL_DOC
    text = body_for_version(fx.ADF_ALL_DOC, 2)
    assert isinstance(text, str)
    for fragment in fx.ADF_ALL_TEXTS:
        assert fragment in text
    assert "Login outage\n\nLogin fails for @Bob Brown since 2024-03-05" in text
    assert "the runbook\nsecond line after a hard break" in text
    for bad in (12345, None, ["x"], {"not": "adf"}):
        assert body_for_version(bad, 2) == bad and body_for_version(bad, 3) == bad
    assert body_for_version("", 3) == {"type": "doc", "version": 1, "content": []}
    assert adf_to_text(text_to_adf("a\nb\n\nc")) == "a\nb\n\nc"


# -- search (Cloud) ----------------------------------------------------------------------------------------------------


def test_cloud_enhanced_jql_token_paging(emu: JiraEmulator) -> None:
    jira = cloud_client(emu)
    jql = 'project in (OPS, "SEC") ORDER BY key ASC'
    keys: list[str] = []
    token = None
    pages = 0
    while True:
        page = jira.enhanced_jql(jql, fields="summary,updated", nextPageToken=token, limit=5)
        assert "total" not in page
        keys.extend(issue["key"] for issue in page["issues"])
        pages += 1
        if page["isLast"]:
            assert "nextPageToken" not in page
            break
        token = page["nextPageToken"]
        assert base64.b64decode(token).decode() == str(len(keys))
    expected = [*fx.OPS_ISSUE_KEYS, fx.SECURE_KEY]
    assert keys == expected and pages == 3
    calls = emu.calls("/rest/api/3/search/jql")
    assert [c.params.get("nextPageToken") for c in calls] == [None, "NQ==", "MTA="]
    assert all(c.status == 200 and c.params["maxResults"] == "5" and c.auth == f"basic:{USER}" for c in calls)
    assert jira.enhanced_jql_get_list_of_tickets(jql, fields="summary", limit=None) is not None
    assert sorted(search_keys(jira, "project = OPS")) == sorted(fx.OPS_ISSUE_KEYS)

    bad = jira.get("rest/api/3/search/jql", params={"jql": "project = OPS", "nextPageToken": "%%%"}, advanced_mode=True)
    assert bad.status_code == 400 and "nextPageToken" in bad.json()["errorMessages"][0]


def test_cloud_search_fields_and_caps(site: JiraSite) -> None:
    with JiraEmulator(site, max_results_cap=4, id_only_max_results_cap=9, embed_comments=3) as emu:
        jira = cloud_client(emu)
        bare = jira.get("rest/api/3/search/jql", params={"jql": "project = OPS", "maxResults": 1000})
        assert len(bare["issues"]) == 9 and all(set(i) == {"id"} for i in bare["issues"])
        keyed = jira.get("rest/api/3/search/jql", params={"jql": "project = OPS", "fields": "key", "maxResults": 1000})
        assert len(keyed["issues"]) == 9 and all(set(i) == {"id", "key"} for i in keyed["issues"])
        full = jira.enhanced_jql(f"key = {fx.HUGE_THREAD_KEY}", fields="*all", limit=1000)
        fields = full["issues"][0]["fields"]
        assert {"summary", "description", "comment", "issuelinks", "project", "updated"} <= set(fields)
        assert fields["comment"]["total"] == 250 and fields["comment"]["maxResults"] == 3
        assert [c["body"]["content"][0]["content"][0]["text"] for c in fields["comment"]["comments"]] == [
            "comment number 1",
            "comment number 2",
            "comment number 3",
        ]
        capped = jira.enhanced_jql("project = OPS", fields="summary,comment", limit=1000)
        assert len(capped["issues"]) == 4 and not capped["isLast"]
        assert set(capped["issues"][0]["fields"]) == {"summary", "comment"}
        no_comment = jira.enhanced_jql("project = OPS", fields="*all,-comment", limit=2)
        assert "comment" not in no_comment["issues"][0]["fields"] and "summary" in no_comment["issues"][0]["fields"]
        # POST with a JSON body (fields as a list); the v2 search/jql serves v2 bodies.
        posted = jira.post(
            "rest/api/2/search/jql",
            data={"jql": f"key = {fx.ADF_ALL_KEY}", "fields": ["description", "summary"], "maxResults": 5},
        )
        assert posted["issues"][0]["fields"]["description"] == adf_to_text(fx.ADF_ALL_DOC)
        assert emu.calls("/rest/api/2/search/jql")[0].params["fields"] == "description,summary"
        assert jira.approximate_issue_count("project = SEC") == {"count": 1}


def test_cloud_old_search_is_gone(emu: JiraEmulator) -> None:
    with pytest.raises(HTTPError) as excinfo:
        cloud_client(emu).get("rest/api/3/search", params={"jql": "project = OPS"})
    assert excinfo.value.response.status_code == 410
    assert "/search/jql" in str(excinfo.value) and str(excinfo.value) == GONE_MESSAGE
    # An old-style client (the Server class pointed at Cloud) sends /rest/api/2/search and gets the same 410.
    legacy = Jira(url=emu.url, username=USER, password=TOKEN, cloud=False)
    with pytest.raises(HTTPError, match="/rest/api/3/search/jql"):
        legacy.jql("project = OPS", start=0, limit=10)
    response = legacy.post("rest/api/2/search", data={"jql": "project = OPS"}, advanced_mode=True)
    assert response.status_code == 410
    assert [r.status for r in emu.calls("/rest/api/") if "/search" in r.path] == [410, 410, 410]


def test_bad_and_unsupported_jql_is_a_400(emu: JiraEmulator) -> None:
    jira = cloud_client(emu)
    for jql, message in [
        ("project = OPS OR project = SEC", "Error in the JQL Query"),
        ("project = OPS AND", "Error in the JQL Query"),
        ("assignee = currentUser()", "Error in the JQL Query"),
        ("updated >= startOfDay()", "Error in the JQL Query"),
        ("project == OPS", "Error in the JQL Query"),
        ("project = OPS ORDER BY summary", "Error in the JQL Query"),
        ("project = NOPE", "The value 'NOPE' does not exist for the field 'project'."),
        ("project = HID", "The value 'HID' does not exist for the field 'project'."),
        ("project in (OPS, OLD)", "The value 'OLD' does not exist for the field 'project'."),
        ("key = OPS-999", "An issue with key 'OPS-999' does not exist"),
        ('updated >= "2024-03-05 00:00:30"', "Date value '2024-03-05 00:00:30' for field 'updated' is invalid"),
        ("ORDER BY updated", "Unbounded JQL queries are not allowed"),
        ("", "Unbounded JQL queries are not allowed"),
    ]:
        with pytest.raises(HTTPError) as excinfo:
            jira.enhanced_jql(jql, fields="key")
        assert excinfo.value.response.status_code == 400, jql
        assert message in str(excinfo.value), (jql, str(excinfo.value))
    assert not emu.errors


# -- search (Server) ---------------------------------------------------------------------------------------------------


def test_server_jql_paging_with_total(site: JiraSite) -> None:
    with JiraEmulator(site, cloud=False, max_results_cap=4) as emu:
        jira = server_client(emu)
        page = jira.jql("project = OPS ORDER BY key ASC", fields="summary", start=3, limit=50)
        assert (page["startAt"], page["maxResults"], page["total"]) == (3, 4, 12)
        assert [i["key"] for i in page["issues"]] == ["OPS-4", "OPS-5", "OPS-6", "OPS-7"]
        assert set(page["issues"][0]["fields"]) == {"summary"}
        keys, start = [], 0
        while True:
            page = jira.jql("project in (OPS, SEC) ORDER BY updated ASC", fields="updated", start=start, limit=4)
            keys.extend(i["key"] for i in page["issues"])
            start += len(page["issues"])
            if start >= page["total"]:
                break
        assert sorted(keys) == sorted([*fx.OPS_ISSUE_KEYS, fx.SECURE_KEY]) and len(keys) == 13
        assert [r.params["startAt"] for r in emu.calls("/rest/api/2/search")][1:] == ["0", "4", "8", "12"]
        assert len(jira.jql_get_list_of_tickets("project = OPS", fields="summary")) == 12
        navigable = jira.get("rest/api/2/search", params={"jql": f"key = {fx.WIKI_KEY}"})["issues"][0]["fields"]
        assert "description" in navigable and "comment" not in navigable
        assert jira.jql("ORDER BY key ASC", limit=0)["total"] == 13  # Server allows unbounded JQL
        with pytest.raises(ValueError, match="only available for Jira Cloud"):
            jira.enhanced_jql("project = OPS")
        for path in (
            "rest/api/2/search/jql",
            "rest/api/3/search/jql",
            "rest/api/3/issue/OPS-1",
            "rest/api/2/project/search",
        ):
            assert jira.get(path, params={"jql": "project = OPS"}, advanced_mode=True).status_code == 404, path


# -- JQL semantics -----------------------------------------------------------------------------------------------------


def test_jql_dates_are_in_the_user_timezone_at_minute_precision(emu: JiraEmulator) -> None:
    jira = cloud_client(emu)
    assert jira.myself()["timeZone"] == "America/Los_Angeles"
    # 2024-03-05 00:00 in Los Angeles is 08:00 UTC: TZ_TRAP (07:59:30Z) is before it, TZ_AFTER (08:00Z) is not.
    before = search_keys(jira, 'project = OPS AND updated < "2024-03-05 00:00"')
    assert fx.TZ_TRAP_KEY in before and fx.TZ_AFTER_KEY not in before
    assert set(before) == {fx.BOUNDARY_LATE_KEY, fx.BOUNDARY_EARLY_KEY, fx.TZ_TRAP_KEY, fx.BAD_BODY_KEY}
    # A reader that sends UTC wall-clock bounds for the UTC day 2024-03-05 gets the Los Angeles day instead
    # ([08:00Z, 08:00Z next day)): it misses BOUNDARY_EARLY (00:00Z) and TZ_TRAP (07:59:30Z).
    day = search_keys(jira, 'project = OPS AND updated >= "2024-03-05 00:00" AND updated < "2024-03-06 00:00"')
    assert day == [fx.TZ_AFTER_KEY]
    # The right window for the UTC day, in the user's timezone: 2024-03-04 16:00 .. 2024-03-05 16:00 (UTC-8).
    utc_day = search_keys(jira, 'project = OPS AND updated >= "2024-03-04 16:00" AND updated < "2024-03-05 16:00"')
    assert set(utc_day) == {fx.BOUNDARY_EARLY_KEY, fx.TZ_TRAP_KEY, fx.TZ_AFTER_KEY}
    # Other accepted date forms, and the strict/non-strict operators at an exact instant.
    assert search_keys(jira, "project = OPS AND updated < 2024-03-05") == search_keys(
        jira, 'project = OPS AND updated < "2024/03/05 00:00"'
    )
    assert fx.TZ_AFTER_KEY in search_keys(jira, 'project = OPS AND updated >= "2024/03/05"')
    assert fx.TZ_AFTER_KEY not in search_keys(jira, 'project = OPS AND updated > "2024-03-05 00:00"')
    assert fx.TZ_AFTER_KEY in search_keys(jira, 'project = OPS AND updated <= "2024-03-05 00:00"')
    assert fx.MOVED_KEY in search_keys(jira, 'project = OPS AND created >= "2024-03-08" AND created < "2024-03-09"')


def test_jql_dates_minute_precision_in_utc() -> None:
    with JiraEmulator(fx.crafted_site(user_timezone="UTC")) as emu:
        jira = cloud_client(emu)
        late = search_keys(jira, 'project = OPS AND updated >= "2024-03-04 23:59" AND updated < "2024-03-05 00:00"')
        assert late == [fx.BOUNDARY_LATE_KEY]  # 23:59:59.999 is inside the minute 23:59
        early = search_keys(jira, 'project = OPS AND updated >= "2024-03-05 00:00" AND updated < "2024-03-05 00:01"')
        assert early == [fx.BOUNDARY_EARLY_KEY]
        assert set(search_keys(jira, 'project = OPS AND updated < "2024-03-05 00:00"')) == {
            fx.BOUNDARY_LATE_KEY,
            fx.BAD_BODY_KEY,
        }


def test_jql_order_by_and_clauses(emu: JiraEmulator, site: JiraSite) -> None:
    jira = cloud_client(emu)
    ops = [i for i in site.issues.values() if i["fields"]["project"]["key"] == "OPS"]

    def instant(issue: dict[str, Any], name: str) -> datetime:
        return parse_jira_time(issue["fields"][name])

    by_updated = [i["key"] for i in sorted(ops, key=lambda i: instant(i, "updated"), reverse=True)]
    assert search_keys(jira, "project = OPS ORDER BY updated DESC") == by_updated
    assert search_keys(jira, "project = OPS ORDER BY updated ASC") == by_updated[::-1]
    assert search_keys(jira, "project = OPS order by key asc") == list(fx.OPS_ISSUE_KEYS)  # OPS-2 before OPS-10
    assert search_keys(jira, "project = OPS ORDER BY key DESC") == list(fx.OPS_ISSUE_KEYS)[::-1]
    by_created = [i["key"] for i in sorted(ops, key=lambda i: instant(i, "created"), reverse=True)]
    assert search_keys(jira, "project = OPS") == by_created  # default: created DESC
    # Multi-key: project key then updated, across two projects.
    two = search_keys(jira, "project in (SEC, OPS) ORDER BY key DESC, updated ASC")
    assert two[0] == fx.SECURE_KEY and two[1:] == list(fx.OPS_ISSUE_KEYS)[::-1]
    assert search_keys(jira, f"id = {fx.WIKI_ID}") == [fx.WIKI_KEY]
    assert search_keys(jira, f"project = OPS AND id > {fx.MOVED_ID} ORDER BY id") == ["OPS-11", "OPS-12"]
    assert search_keys(jira, f"key = {fx.WIKI_KEY}") == [fx.WIKI_KEY]
    assert search_keys(jira, f"issuekey in ({fx.WIKI_KEY}, {fx.SECURE_KEY}) ORDER BY key") == [
        fx.WIKI_KEY,
        fx.SECURE_KEY,
    ]
    assert search_keys(jira, "project = ops AND project != SEC ORDER BY id ASC") == list(fx.OPS_ISSUE_KEYS)
    assert search_keys(jira, 'project = "Security"') == [fx.SECURE_KEY]  # by name
    assert search_keys(jira, f"project = {fx.SEC_PROJECT_ID}") == [fx.SECURE_KEY]  # by id
    assert search_keys(jira, 'project = OPS AND updated >= "-1w"') == []
    assert not emu.errors


# -- projects and ACLs -------------------------------------------------------------------------------------------------


def test_project_paging_follows_absolute_next_page(site: JiraSite) -> None:
    site.add_project("DOC", "Documentation")
    site.add_project("WEB", "Website")
    with JiraEmulator(site, project_page_size=2) as emu:
        jira = cloud_client(emu)
        projects = jira.get_all_projects()
        assert [p["key"] for p in projects] == ["DOC", "NEW", "OPS", "SEC", "WEB"]
        calls = emu.calls("/rest/api/3/project/search")
        assert len(calls) == 3 and all(c.status == 200 for c in calls)
        assert [c.params.get("startAt") for c in calls] == [None, "2", "4"]
        first = jira.get("rest/api/3/project/search")
        assert first["nextPage"].startswith(f"{emu.url}/rest/api/3/project/search?")
        assert first["isLast"] is False and first["total"] == 5 and len(first["values"]) == 2
        last = jira.get("rest/api/3/project/search", params={"startAt": 4, "maxResults": 100})
        assert last["isLast"] is True and "nextPage" not in last and last["maxResults"] == 2
        # Like Cloud, project/search ignores the includeArchived the client sends and filters by status.
        assert [p["key"] for p in jira.get_all_projects(included_archived=True)] == [p["key"] for p in projects]
        wide = {"status": ["live", "archived"], "maxResults": 50}
        archived = jira.get("rest/api/3/project/search", params=wide)["values"]
        archived += jira.get("rest/api/3/project/search", params={**wide, "startAt": 2})["values"]
        archived += jira.get("rest/api/3/project/search", params={**wide, "startAt": 4})["values"]
        assert [p["key"] for p in archived] == ["DOC", "NEW", "OLD", "OPS", "SEC", "WEB"]
        assert next(p for p in archived if p["key"] == "OLD")["archived"] is True
        assert jira.get_project("OPS")["id"] == fx.OPS_PROJECT_ID
        assert jira.get("rest/api/3/project/OLD")["archived"] is True
        with pytest.raises(HTTPError, match="No project could be found with key 'HID'"):
            jira.get_project("HID")
        with pytest.raises(HTTPError):
            jira.get_project_permission_scheme("HID", expand="permissions")


def test_server_project_list_is_not_paged(server_emu: JiraEmulator) -> None:
    jira = server_client(server_emu)
    assert [p["key"] for p in jira.get_all_projects()] == ["NEW", "OPS", "SEC"]
    assert [p["key"] for p in jira.get_all_projects(included_archived=True)] == ["NEW", "OLD", "OPS", "SEC"]
    assert server_emu.paths() == ["/rest/api/2/project", "/rest/api/2/project"]


def test_permission_scheme_and_role_actors(emu: JiraEmulator) -> None:
    jira = cloud_client(emu)
    scheme = jira.get_project_permission_scheme("OPS", expand="permissions")
    assert scheme["id"] == 10000 and scheme["name"] == "OPS scheme"
    browse = [g["holder"] for g in scheme["permissions"] if g["permission"] == "BROWSE_PROJECTS"]
    assert browse == [
        {"type": "group", "parameter": "jira-users", "value": "jira-users", "expand": "group"},
        {"type": "projectRole", "parameter": fx.OPS_ROLE_ID, "value": fx.OPS_ROLE_ID, "expand": "projectRole"},
    ]
    others = [g for g in scheme["permissions"] if g["permission"] != "BROWSE_PROJECTS"]
    assert [(g["holder"]["parameter"], g["permission"]) for g in others] == [("jira-admins", "ADMINISTER_PROJECTS")]
    assert "permissions" not in jira.get_project_permission_scheme("OPS")
    sec = jira.get_project_permission_scheme("SEC", expand="permissions")
    assert sec["id"] == 10001
    assert [g["holder"]["parameter"] for g in sec["permissions"] if g["permission"] == "BROWSE_PROJECTS"] == [
        "security-team"
    ]
    actors = jira.get_project_actors_for_role_project("OPS", fx.OPS_ROLE_ID)
    assert [a["actorGroup"]["name"] for a in actors if a["type"] == "atlassian-group-role-actor"] == ["ops-devs"]
    assert [a["actorUser"]["accountId"] for a in actors if a["type"] == "atlassian-user-role-actor"] == ["acc-carol"]
    role = jira.get(f"rest/api/3/project/OPS/role/{fx.OPS_ROLE_ID}")
    assert role["id"] == 10002 and role["name"] == fx.OPS_ROLE_NAME
    assert jira.get_project_roles("OPS") == {fx.OPS_ROLE_NAME: f"{emu.url}/rest/api/3/project/10000/role/10002"}
    with pytest.raises(HTTPError, match="Can not find a project role"):
        jira.get_project_actors_for_role_project("OPS", "99999")


# -- issues ---------------------------------------------------------------------------------------------------------


def test_comment_paging(emu: JiraEmulator) -> None:
    jira = cloud_client(emu)
    embedded = jira.enhanced_jql(f"key = {fx.HUGE_THREAD_KEY}", fields="comment")["issues"][0]["fields"]["comment"]
    assert (len(embedded["comments"]), embedded["maxResults"], embedded["total"], embedded["startAt"]) == (
        20,
        20,
        250,
        0,
    )
    full = jira.get_issue(fx.HUGE_THREAD_KEY)["fields"]["comment"]
    assert (len(full["comments"]), full["maxResults"], full["total"]) == (250, 250, 250)
    bodies: list[str] = []
    start = 0
    while True:
        page = jira.get(
            f"rest/api/3/issue/{fx.HUGE_THREAD_KEY}/comment",
            params={"startAt": start, "maxResults": 1000, "orderBy": "created"},
        )
        assert page["maxResults"] == 100 and page["total"] == 250 and page["startAt"] == start
        bodies.extend(c["body"]["content"][0]["content"][0]["text"] for c in page["comments"])
        start += len(page["comments"])
        if not page["comments"] or start >= page["total"]:
            break
    assert bodies == [f"comment number {i}" for i in range(1, 251)]
    assert len(emu.calls(f"/rest/api/3/issue/{fx.HUGE_THREAD_KEY}/comment")) == 3
    newest = jira.get(f"rest/api/2/issue/{fx.HUGE_THREAD_KEY}/comment", params={"maxResults": 2, "orderBy": "-created"})
    assert [c["body"] for c in newest["comments"]] == ["comment number 250", "comment number 249"]
    default = cloud_client(emu, api_version="2").issue_get_comments(fx.HUGE_THREAD_KEY)
    assert len(default["comments"]) == 100 and default["total"] == 250
    adf_comment = jira.get(f"rest/api/2/issue/{fx.ADF_ALL_KEY}/comment")["comments"][0]
    assert adf_comment["body"] == "Rolled back; @Alice Anders confirmed that logins work again."
    one = jira.get(f"rest/api/3/issue/{fx.ADF_ALL_KEY}/comment/200051")
    assert one["body"] == fx.ADF_COMMENT_DOC


def test_issue_bodies_v2_and_v3(emu: JiraEmulator, site: JiraSite) -> None:
    v3 = cloud_client(emu)
    v2 = cloud_client(emu, api_version="2")
    assert v2.get_issue(fx.WIKI_KEY)["fields"]["description"] == fx.WIKI_DESCRIPTION
    assert v3.get_issue(fx.WIKI_KEY)["fields"]["description"] == text_to_adf(fx.WIKI_DESCRIPTION)
    assert v3.get_issue(fx.ADF_ALL_KEY)["fields"]["description"] == fx.ADF_ALL_DOC
    assert v2.get_issue(fx.ADF_ALL_KEY)["fields"]["description"] == adf_to_text(fx.ADF_ALL_DOC)
    for client in (v2, v3):
        assert client.get_issue(fx.BAD_BODY_KEY)["fields"]["description"] == 12345
    served = v3.get_issue(fx.WIKI_KEY)
    assert served["self"] == f"{emu.url}/rest/api/3/issue/{fx.WIKI_ID}"
    assert {k: v for k, v in served.items() if k != "expand"} == site.issue_view(fx.WIKI_KEY, 3, base_url=emu.url)
    trimmed = v3.get_issue(fx.SECURE_KEY, fields="summary,security,comment")
    assert set(trimmed["fields"]) == {"summary", "security", "comment"}
    assert trimmed["fields"]["security"] == fx.SECURITY_LEVEL
    assert v3.get_issue(fx.SECURE_KEY, fields="*all,-comment")["fields"].keys() >= {"summary", "description"}
    assert v3.get_issue(fx.SECURE_ID)["key"] == fx.SECURE_KEY
    assert next(c.path for c in emu.calls("/rest/api/2/issue")) == f"/rest/api/2/issue/{fx.WIKI_KEY}"


def test_moved_issue_resolves_by_old_key(emu: JiraEmulator, site: JiraSite) -> None:
    jira = cloud_client(emu)
    site.move_issue(fx.MOVED_KEY, "NEW", fx.MOVED_NEW_KEY, fx.MOVE_UPDATED)
    by_old = jira.get_issue(fx.MOVED_KEY)
    assert (by_old["id"], by_old["key"]) == (fx.MOVED_ID, fx.MOVED_NEW_KEY)
    assert by_old["fields"]["project"] == {"id": fx.NEW_PROJECT_ID, "key": "NEW", "name": "New Platform"}
    assert by_old["fields"]["updated"] == fx.MOVE_UPDATED
    assert jira.get_issue(fx.MOVED_NEW_KEY)["id"] == fx.MOVED_ID
    assert search_keys(jira, "project = NEW") == [fx.MOVED_NEW_KEY]
    ops = search_keys(jira, "project = OPS")
    assert len(ops) == 11 and fx.MOVED_NEW_KEY not in ops and fx.MOVED_KEY not in ops
    assert search_keys(jira, f"key = {fx.MOVED_KEY}") == [fx.MOVED_NEW_KEY]
    assert search_keys(jira, 'project = NEW AND updated >= "2024-03-20 00:00"') == [fx.MOVED_NEW_KEY]


def test_deleted_and_invisible_issues_are_404(emu: JiraEmulator, site: JiraSite) -> None:
    jira = cloud_client(emu)
    assert jira.get_issue(fx.DELETED_KEY)["id"] == fx.DELETED_ID
    site.delete_issue(fx.DELETED_ID)
    for id_or_key in (fx.DELETED_KEY, fx.DELETED_ID, fx.HIDDEN_ISSUE_KEY, "NOPE-1"):
        with pytest.raises(HTTPError, match=r"Issue does not exist or you do not have permission to see it\."):
            jira.get_issue(id_or_key)
    with pytest.raises(HTTPError):
        jira.get(f"rest/api/3/issue/{fx.HIDDEN_ISSUE_KEY}/comment")
    assert fx.DELETED_KEY not in search_keys(jira, "project = OPS")
    every = search_keys(jira, 'updated >= "2000-01-01"')
    assert len(every) == 12 and fx.HIDDEN_ISSUE_KEY not in every and fx.ARCHIVED_ISSUE_KEY not in every
    assert jira.get_issue(fx.ARCHIVED_ISSUE_KEY)["fields"]["project"]["key"] == "OLD"  # archived: readable
    site.set_field(fx.WIKI_KEY, "summary", "Renamed")
    assert jira.get_issue(fx.WIKI_KEY, fields="summary")["fields"]["summary"] == "Renamed"


# -- faults, retries, auth --------------------------------------------------------------------------------------------


def test_injected_429_with_backoff_converges(emu: JiraEmulator) -> None:
    jira = cloud_client(emu, **NO_WAIT)
    emu.inject("429", path="/search/jql", times=3, retry_after=0)
    keys = search_keys(jira, "project = SEC")
    assert keys == [fx.SECURE_KEY]
    calls = emu.calls("/rest/api/3/search/jql")
    assert [c.status for c in calls] == [429, 429, 429, 200]
    assert len({tuple(sorted(c.params.items())) for c in calls}) == 1  # the same request, retried
    emu.inject("500", path="/myself")
    emu.inject("503", path="/myself")
    assert jira.myself()["accountId"] == "acc-rag-bot"
    assert [c.status for c in emu.calls("/rest/api/3/myself")] == [500, 503, 200]
    assert emu.pending_faults() == 0


def test_429_headers_and_default_client_retry(emu: JiraEmulator) -> None:
    plain = cloud_client(emu)  # no backoff: atlassian retries a 429 with Retry-After exactly once
    emu.inject("429", retry_after=0)
    assert plain.myself()["displayName"] == "RAG Bot"
    emu.inject("429", times=2)
    with pytest.raises(HTTPError, match=r"Rate limit exceeded\."):
        plain.myself()
    emu.inject("429", retry_after=2.5)
    response = requests.get(f"{emu.url}/rest/api/3/myself", auth=(USER, TOKEN), timeout=5)
    assert response.status_code == 429 and response.headers["Retry-After"] == "3"
    assert response.headers["Content-Type"] == "application/json;charset=UTF-8"
    assert [c.status for c in emu.calls("/rest/api/3/myself")] == [429, 200, 429, 429, 429]


def test_dropped_connection(emu: JiraEmulator) -> None:
    emu.inject("drop", path="/issue/")
    with pytest.raises(requests.exceptions.ConnectionError):
        cloud_client(emu).get_issue(fx.WIKI_KEY)
    emu.inject("drop", path="/issue/", times=2)
    assert cloud_client(emu, **NO_WAIT).get_issue(fx.WIKI_KEY)["key"] == fx.WIKI_KEY
    assert [c.status for c in emu.calls("/rest/api/3/issue/")] == [0, 0, 0, 200]


def test_auth(emu: JiraEmulator, site: JiraSite) -> None:
    with pytest.raises(HTTPError, match=r"Unauthorized \(401\)"):
        cloud_client(emu, password="wrong").myself()
    with pytest.raises(HTTPError, match=r"Unauthorized \(401\)"):
        Jira(url=emu.url, token=PAT, cloud=True).myself()  # Cloud takes no PATs
    anonymous = requests.get(f"{emu.url}/rest/api/3/myself", timeout=5)
    assert anonymous.status_code == 401 and anonymous.text == "Unauthorized"
    assert anonymous.headers["Content-Type"].startswith("text/plain")
    assert [r.auth for r in emu.requests] == [f"basic:{USER}", "bearer", "none"]
    emu.inject("403", path="/issue/")
    with pytest.raises(HTTPError, match="You do not have permission") as excinfo:
        cloud_client(emu).get_issue(fx.WIKI_KEY)
    assert excinfo.value.response.status_code == 403
    emu.inject("401")
    with pytest.raises(HTTPError) as excinfo:
        cloud_client(emu).myself()
    assert excinfo.value.response.status_code == 401 and "not authenticated" in str(excinfo.value)
    emu.inject("404", path="/project/")
    assert cloud_client(emu).myself()["name"] == USER  # the fault waits for its path
    with pytest.raises(HTTPError):
        cloud_client(emu).get_project("OPS")

    with JiraEmulator(site, cloud=False) as server:
        assert Jira(url=server.url, token=PAT).myself()["name"] == USER
        assert server_client(server).myself()["timeZone"] == fx.CRAFTED_TIMEZONE
        with pytest.raises(HTTPError, match=r"Unauthorized \(401\)"):
            Jira(url=server.url, token="wrong").myself()
        assert [r.auth for r in server.requests] == ["bearer", f"basic:{USER}", "bearer"]
        assert server.answered() == server.requests[:2]


def test_unknown_paths_and_methods(emu: JiraEmulator) -> None:
    jira = cloud_client(emu)
    assert jira.get("rest/api/3/nothing/here", advanced_mode=True).status_code == 404
    assert jira.get("rest/agile/1.0/board", advanced_mode=True).status_code == 404
    assert jira.post("rest/api/3/myself", data={}, advanced_mode=True).status_code == 405
    info = jira.get("rest/api/2/serverInfo")
    assert info["deploymentType"] == "Cloud" and info["baseUrl"] == emu.url
    assert emu.paths()[-1] == "/rest/api/2/serverInfo" and not emu.errors


def test_concurrent_keep_alive_clients(emu: JiraEmulator) -> None:
    failures: list[BaseException] = []

    def worker() -> None:
        jira = cloud_client(emu)
        try:
            for _ in range(15):
                assert jira.get_issue(fx.SECURE_KEY, fields="summary")["key"] == fx.SECURE_KEY
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert not failures
    assert len(emu.answered("/rest/api/3/issue/")) == 8 * 15 and not emu.errors


def test_stop_closes_keep_alive_connections(site: JiraSite) -> None:
    with JiraEmulator(site) as emulator:
        jira = cloud_client(emulator)
        assert jira.myself()["name"] == USER
    with pytest.raises(requests.exceptions.ConnectionError):
        jira.myself()
    assert [r.status for r in emulator.requests] == [200]
