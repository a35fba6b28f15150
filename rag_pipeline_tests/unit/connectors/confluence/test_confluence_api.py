"""The live Confluence reader through the real atlassian-python-api client against the emulator: discovery and
paging, reads by date window, restriction inheritance, anonymous spaces, failing closed, retries on 429, and
reconciliation of deleted, moved and re-restricted pages."""

from __future__ import annotations

import pytest

from rag_pipeline.connectors.confluence.acl import restricted_group, space_group
from rag_pipeline.connectors.confluence.api import ConfluenceAccessError
from rag_pipeline.connectors.confluence.reconcile import plan_space
from rag_pipeline.index.store import IndexedAcl, IndexedDocument
from rag_pipeline.sources.document import Acl
from rag_pipeline.sources.paging import GuardTripped
from rag_pipeline_tests.kit.confluence_fixtures import SITE, crafted_site, reader
from rag_pipeline_tests.kit.emulators.confluence_api import ConfluenceEmulator, at

DAYS = ["2024-03-01", "2024-03-02", "2024-03-03"]
ENG = space_group(SITE, "ENG")


def doc_id(page: str) -> str:
    return f"confluence:{SITE}:{page}"


@pytest.mark.parametrize("cloud", [True, False], ids=["cloud", "datacenter"])
def test_discovery_pages_through_spaces_and_filters(cloud: bool) -> None:
    site = crafted_site()
    for n in range(120):
        site.add_space(f"S{n:03d}", f"Space {n}")
    site.add_space("~jdoe", "Personal", type="personal")
    site.add_space("OLD", "Archived", status="archived")
    with ConfluenceEmulator(site, cloud=cloud) as emu:
        found = reader(emu, cloud, space_deny=("S0[0-9][0-9]",), space_allow=()).discover()
        listing_calls = emu.calls("/rest/api/space")
        auth = {r.auth for r in emu.requests}
    keys = [s.key for s in found.spaces]
    assert keys == ["ENG", "HR", "PUB", "S100", *[f"S{n}" for n in range(101, 120)]]
    # 123 current spaces at 50 a page; the archived one is never listed (status=current).
    assert len(listing_calls) == 3
    # A personal space's "~" key cannot be a partition key: a problem, never a space.
    assert [p.location for p in found.problems] == ["confluence space listing entry 124"]
    assert auth == ({"basic:bot@example.com"} if cloud else {"bearer"})


@pytest.mark.parametrize("cloud", [True, False], ids=["cloud", "datacenter"])
def test_read_days_by_window_with_paging(cloud: bool) -> None:
    site = crafted_site()
    for n in range(60):  # 60 more pages on 2024-03-02: two search pages at the emulator's cap of 50
        site.add_page("ENG", f"Note {n}", f"<p>note {n}</p>", at("2024-03-02", 6, n % 60), id=str(5000 + n))
    with ConfluenceEmulator(site, cloud=cloud) as emu:
        r = reader(emu, cloud)
        day2 = r.read_days("ENG", ["2024-03-02"])
        both = r.read_days("ENG", ["2024-03-03"])
        searches = emu.calls("/content/search")
    ids = {d.id for d in day2.documents}
    assert ids == {doc_id(p) for p in ("2002", "2003", "2004")} | {doc_id(str(5000 + n)) for n in range(60)}
    assert set(day2.partition_day.values()) == {"2024-03-02"}
    assert [d.id for d in both.documents] == [doc_id("2005"), doc_id("2006")]  # the blog post at 23:55 too
    assert len(searches) == 3 and all("order by created asc" in s.params["cql"] for s in searches)
    assert day2.problems == [] and r.stats.calls


def test_overlap_goes_to_the_first_day_and_zone_is_used() -> None:
    site = crafted_site()
    site.time_zone = "Asia/Tokyo"  # CQL dates are the user's wall clock: UTC midnight is 09:00 there
    site.add_page("ENG", "Late", "<p>late</p>", at("2024-03-01", 23, 50), id="2100")
    with ConfluenceEmulator(site) as emu:
        read = reader(emu).read_days("ENG", ["2024-03-02"])
        cql = emu.calls("/content/search")[0].params["cql"]
    assert 'lastModified >= "2024/03/02 08:45"' in cql and 'lastModified < "2024/03/03 09:00"' in cql
    assert read.partition_day[doc_id("2100")] == "2024-03-02"
    assert doc_id("2001") not in read.partition_day


def test_restricted_ancestor_hides_descendants_and_levels_intersect() -> None:
    with ConfluenceEmulator(crafted_site()) as emu:
        docs = {d.id: d for d in reader(emu).read_days("ENG", DAYS).documents}
    home, secret, child = docs[doc_id("2001")], docs[doc_id("2002")], docs[doc_id("2003")]
    deep, sibling = docs[doc_id("2004")], docs[doc_id("2005")]
    assert home.acl == Acl(groups=(ENG,))
    assert secret.acl == Acl(groups=(restricted_group(SITE, "2002"),), restricted_to=(ENG,))
    # An unrestricted page under restricted ones carries its nearest restricted page's chain.
    assert deep.acl == child.acl == Acl(groups=(restricted_group(SITE, "2003"),), restricted_to=(ENG,))
    assert sibling.acl == secret.acl
    assert not deep.acl.admits("acc-alice", {ENG})  # may view the space, not the restricted chain
    assert deep.title == "Engineering › Home › Secret › Secret child › Deep"
    assert deep.metadata["ancestors"] == ["2001", "2002", "2003"]


def test_anonymous_space_is_public() -> None:
    with ConfluenceEmulator(crafted_site()) as emu:
        read = reader(emu).read_days("PUB", DAYS)
    assert [d.acl for d in read.documents] == [Acl(public=True)]


def test_fails_closed_when_an_ancestors_restrictions_cannot_be_read() -> None:
    with ConfluenceEmulator(crafted_site()) as emu:
        # Home (2001) is not modified on 03-02: its restriction is asked for, and refused.
        emu.inject("403", path="/content/2001/restriction", times=5)
        read = reader(emu).read_days("ENG", ["2024-03-02"])
    docs = {d.id: d for d in read.documents}
    assert {d.acl for d in docs.values()} == {Acl()}
    assert not docs[doc_id("2004")].acl.admits("acc-dave", {ENG, restricted_group(SITE, "2003")})
    failed = [p for p in read.problems if "fail closed" in p.reason]
    assert {p.location.split(" (")[0] for p in failed} == {f"confluence page {n}" for n in ("2002", "2003", "2004")}
    assert "ancestor 2001" in failed[0].reason and "403" in failed[0].reason


def test_429_is_retried_after_retry_after() -> None:
    with ConfluenceEmulator(crafted_site()) as emu:
        emu.inject("429", path="/content/search", times=2, retry_after=0)
        emu.inject("503", path="/child/comment", times=1)
        r = reader(emu)
        read = r.read_days("ENG", ["2024-03-01"])
        statuses = [c.status for c in emu.calls("/content/search")]
    assert statuses == [429, 429, 200]
    assert [d.id for d in read.documents] == [doc_id("2001")]
    assert r.stats.retries == {"http_429": 2, "http_503": 1}


def test_a_server_that_repeats_its_next_link_trips_the_guard() -> None:
    with ConfluenceEmulator(crafted_site(), cloud=False) as emu:
        r = reader(emu, cloud=False, page_size=1)
        original = emu._page

        def stuck(items, params, resource, cap):
            page = original(items, {**params, "start": "0"}, resource, cap)
            return page

        emu._page = stuck  # type: ignore[method-assign]
        with pytest.raises(GuardTripped):
            r.read_days("ENG", DAYS)


def indexed(doc_ids: dict[str, Acl]) -> dict[str, IndexedDocument]:
    return {
        d: IndexedDocument(
            d, 1.0, "h", IndexedAcl(a.public, frozenset(a.users), frozenset(a.groups), frozenset(a.restricted_to))
        )
        for d, a in doc_ids.items()
    }


def test_reconcile_deleted_moved_and_restriction_changes() -> None:
    site = crafted_site()
    with ConfluenceEmulator(site) as emu:
        r = reader(emu)
        current = {d.id: d.acl for d in r.read_days("ENG", DAYS).documents}
        site.contents["2006"].status = "trashed"  # deleted at the source
        site.contents["2005"].space = "HR"  # moved to another space (its parent stays in ENG: a root there)
        site.contents["2005"].parent = None
        site.contents["2002"].read_groups, site.contents["2002"].read_users = [], []  # restriction lifted
        site.contents["2004"].parent = "2001"  # moved under another parent, out of the restricted chain
        plan = plan_space(reader(emu), "ENG", indexed(current), ancestors={doc_id("2004"): ["2001", "2002", "2003"]})
    assert plan.remove == [doc_id("2006")]
    moved = {d.id: d for d in plan.rewrite}
    assert set(moved) == {doc_id("2004"), doc_id("2005")}
    assert moved[doc_id("2005")].container == "HR" and moved[doc_id("2005")].title == "People › Under secret"
    deep = moved[doc_id("2004")]
    assert deep.title == "Engineering › Home › Deep" and deep.acl == Acl(groups=(ENG,))
    assert moved[doc_id("2004")].version > 1.0
    # Lifting 2002's restriction: 2002 becomes the space's; 2003 (restricted itself) keeps its own chain only.
    assert plan.acl_updates == {doc_id("2002"): Acl(groups=(ENG,))}


def test_reconcile_a_space_gone_removes_its_documents() -> None:
    site = crafted_site()
    with ConfluenceEmulator(site) as emu:
        del site.spaces["HR"]
        plan = plan_space(reader(emu), "HR", indexed({doc_id("4001"): Acl(groups=(space_group(SITE, "HR"),))}))
        assert plan.remove == [doc_id("4001")]
        emu.inject("500", path="/content/search", times=20)
        with pytest.raises(ConfluenceAccessError):
            plan_space(reader(emu, max_retries=0), "ENG", {})
