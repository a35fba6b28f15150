"""The principal directory: who exists in Slack and Jira, one person across both, readers resolved from it,
``explain`` agreeing with search, and membership changes reaching the index.

Slack is read through the real slack-sdk client from the Web API emulator (and from the export the same
workspace writes); Jira offline from a directory file. The index is the embedded engine with a 4-d stand-in
encoder (no dense model is needed for an ACL).
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rag_pipeline.connectors.jira import directory as jira_directory
from rag_pipeline.connectors.jira.dump import issue_to_document, project_group, security_level_group
from rag_pipeline.connectors.slack import directory as slack_directory
from rag_pipeline.connectors.slack.threads import thread_document_id, workspace_group
from rag_pipeline.defs.chain.resources import QdrantResource
from rag_pipeline.defs.directory import DirectoryResource, build_directory_asset
from rag_pipeline.defs.slack.resources import SlackExportResource
from rag_pipeline.directory.accounts import DirectorySnapshot
from rag_pipeline.directory.explain import explain
from rag_pipeline.directory.lookup import DirectoryLookup
from rag_pipeline.directory.people import Links, UnknownPerson, find_person
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.directory.sync import sync_directory
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.index_info import claim_dense_model
from rag_pipeline.index.store import SearchFilter, VectorStore
from rag_pipeline.retrieval.retriever import Retriever, search_filter
from rag_pipeline.serving.identity import IdentityError, resolve_reader
from rag_pipeline.sources.document import Document
from rag_pipeline.vectors.sparse import Bm25Encoder
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.data import jira_issue
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace
from rag_pipeline_tests.kit.slack_index import UNLOADABLE_MODEL, index_threads, read_threads, reader

SITE = "jira.crafted.test"
GUEST = "U0GUEST001"
MEMBERS = workspace_group(F.CRAFTED_TEAM)
OPS, SECURE = project_group(SITE, "OPS"), security_level_group(SITE, "10001")
VPN_THREAD = thread_document_id(F.CRAFTED_TEAM, F.PRIVATE_CHANNEL, F.PRIVATE_THREAD_ROOT_TS)
EMAILS = {F.ALICE: "Alice.Anders@Crafted.Example", F.BOB: "bob@crafted.example", F.CAROL: "carol@crafted.example"}


def workspace() -> SlackWorkspace:
    """The crafted workspace with emails (Dave has none), a guest in the private channel, and two bad records."""
    ws = F.crafted_workspace()
    ws.scopes.add("users:read.email")  # without it Slack serves no emails
    for user in ws.users:
        if user["id"] in EMAILS:
            user["profile"]["email"] = EMAILS[user["id"]]
    ws.external_users[F.EXTERNAL_USER]["profile"]["email"] = "erin@partner.example"
    ws.users.append(
        {"id": GUEST, "team_id": F.CRAFTED_TEAM, "name": "gina", "is_restricted": True,
         "profile": {"display_name": "gina", "email": "gina@contractor.example"}}
    )  # fmt: skip
    ws.users.append({"name": "ghost", "team_id": F.CRAFTED_TEAM, "profile": {"display_name": "ghost"}})
    ws.users.append({"id": "U0BADMAIL1", "team_id": F.CRAFTED_TEAM, "name": "x", "profile": {"email": "not an email"}})
    ws.channel(F.PRIVATE_CHANNEL).members.append(GUEST)
    return ws


def jira_directory_file(path: Path) -> Path:
    """Jira accounts: Alice (email in another case) in two groups, an account without email, Bob under another
    email (joined by the links file only), a row without an id."""
    rows = [
        "account_id,email,groups,display_name",
        "acc-alice,ALICE.anders@crafted.example,jira-devs;project:OPS;security:10001,Alice A.",
        "acc-noemail,,project:OPS,No Mail",
        "acc-bobby,bobby@elsewhere.example,jira-users,Bobby",
        ",someone@crafted.example,jira-devs,No Id",
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


def jira_snapshot(tmp_path: Path) -> DirectorySnapshot:
    snapshot = DirectorySnapshot("jira", SITE, 1_700_000_000.0)
    jira_directory.read_directory_file(jira_directory_file(tmp_path / "jira_users.csv"), SITE, snapshot)
    return snapshot


def jira_documents() -> list[Document]:
    issues = [
        jira_issue("1", "OPS-1", "2024-03-02T09:00:00.000+0000", description="Rotating the VPN certificates runbook"),
        jira_issue("2", "OPS-2", "2024-03-02T10:00:00.000+0000", description="VPN superuser credentials",
                   security={"id": "10001", "name": "Internal"}),
        jira_issue("3", "HR-1", "2024-03-03T10:00:00.000+0000", description="Hiring plan for the VPN team"),
    ]  # fmt: skip
    return [issue_to_document(i, SITE) for i in issues]


@pytest.fixture
def emu():
    with SlackEmulator(workspace()) as emulator:
        yield emulator


def test_slack_directory_from_the_web_api(emu: SlackEmulator, tmp_path: Path) -> None:
    snapshot = slack_directory.read_api_directory(reader(emu))
    accounts = snapshot.accounts
    statuses = {a: accounts[a].status for a in (F.ALICE, GUEST, F.FRANK, F.EXTERNAL_USER, F.BOT_USER)}
    assert statuses == {F.ALICE: "member", GUEST: "guest", F.FRANK: "deleted", F.EXTERNAL_USER: "external",
                        F.BOT_USER: "bot"}  # fmt: skip
    # Only full members read public channels; the guest reads the private channel it is in.
    assert dict(accounts[F.ALICE].groups) == {MEMBERS: f"member of Slack workspace {F.CRAFTED_TEAM}"}
    assert not accounts[GUEST].groups and [c.id for c in accounts[GUEST].channels] == [F.PRIVATE_CHANNEL]
    assert accounts[F.ALICE].email == "alice.anders@crafted.example"
    # The external member is known through the shared channel it reads (users.list never lists it).
    assert [(c.id, c.private) for c in accounts[F.EXTERNAL_USER].channels] == [(F.SHARED_CHANNEL, False)]
    assert snapshot.channel_members[F.SHARED_CHANNEL][2] == (F.EXTERNAL_USER,)
    # Bad records: the one without an id is skipped, the bad email is dropped and its account kept.
    reasons = [str(p) for p in snapshot.problems]
    assert any("no id" in r for r in reasons) and any("'not an email'" in r for r in reasons), reasons
    assert accounts["U0BADMAIL1"].email is None
    # users.list (1 page) + conversations.list (1) + conversations.members of the private and the shared channel.
    methods = [c.method for c in emu.calls()]
    assert methods.count("users.list") == 1 and methods.count("conversations.members") == 2, methods
    assert snapshot.api_calls == len(methods) - methods.count("auth.test")

    # The export the same workspace writes gives the same directory.
    emu.workspace.write_export(tmp_path / "export")
    exported = slack_directory.read_export_directory(tmp_path / "export", F.CRAFTED_TEAM)
    assert {a: (x.status, dict(x.groups)) for a, x in exported.accounts.items()} == {
        a: (x.status, dict(x.groups)) for a, x in accounts.items()
    }
    assert exported.channel_members[F.PRIVATE_CHANNEL][2] == snapshot.channel_members[F.PRIVATE_CHANNEL][2]


def _directory(emu: SlackEmulator, tmp_path: Path) -> DirectoryStore:
    store = DirectoryStore(tmp_path / "directory.sqlite")
    store.replace(slack_directory.read_api_directory(reader(emu)))
    store.replace(jira_snapshot(tmp_path))
    return store


def test_one_person_across_sources(emu: SlackEmulator, tmp_path: Path) -> None:
    store = _directory(emu, tmp_path)
    # Email matching is case-insensitive, from either side, and by any account id.
    for query in ("alice.anders@CRAFTED.example", F.ALICE, "slack:" + F.ALICE, "jira:acc-alice", "acc-alice"):
        alice = find_person(store, query)
        assert alice.ids() == {"jira": ["acc-alice"], "slack": [F.ALICE]}, query
    assert set(alice.groups()) == {MEMBERS, "jira:jira.crafted.test:group:jira-devs", OPS, SECURE}
    assert [c.name for _, c in alice.channels()] == ["security"]
    assert alice.describe()["synced"].keys() == {"slack", "jira"}
    principal = alice.principal()
    assert set(principal.all_user_ids()) == {F.ALICE, "acc-alice"}
    # Accounts without an email are never joined by it: Dave (Slack, none) and acc-noemail (Jira, none).
    assert find_person(store, F.DAVE).ids() == {"slack": [F.DAVE]}
    assert find_person(store, "acc-noemail").ids() == {"jira": ["acc-noemail"]}
    # Bob's accounts have different emails: two people until the links file joins them.
    assert find_person(store, F.BOB).ids() == {"slack": [F.BOB]}
    links_file = tmp_path / "links.txt"
    links_file.write_text(f"# Bob's Jira account predates his email change\nslack:{F.BOB}, jira:acc-bobby\n")
    bob = find_person(store, "bobby@elsewhere.example", Links.read(links_file))
    assert bob.ids() == {"jira": ["acc-bobby"], "slack": [F.BOB]}
    # A deactivated account is shown but admits nothing.
    frank = find_person(store, F.FRANK)
    assert frank.accounts[0].status == "deleted" and frank.principal().all_user_ids() == ()
    assert not frank.groups()
    with pytest.raises(UnknownPerson):
        find_person(store, "nobody@crafted.example")
    bad_links = tmp_path / "bad_links.txt"
    bad_links.write_text("alice U0ALICE001\n")
    with pytest.raises(ValueError, match=r"bad_links\.txt:1: 'alice' is neither an email"):
        Links.read(bad_links)


def _index(emu: SlackEmulator, path: Path) -> EdgeVectorStore:
    store = EdgeVectorStore(path)
    store.create_collections(4)
    documents = read_threads(emu, F.GENERAL_CHANNEL, F.SHARED_CHANNEL, F.PRIVATE_CHANNEL) + jira_documents()
    index_threads(store, documents)
    return store


def _visible_by_search(store: VectorStore, principal: Any, document_id: str) -> bool:
    flt = replace(search_filter(principal), document_ids=(document_id,))
    return store.count(store.names.children, flt) > 0


def test_explain_each_acl_kind_and_agree_with_search(emu: SlackEmulator, tmp_path: Path) -> None:
    directory = _directory(emu, tmp_path)
    store = _index(emu, tmp_path / "qdrant")
    try:
        indexed = store.indexed_documents()
        shared_thread = next(d for d in indexed if f":{F.SHARED_CHANNEL}:" in d)
        general_thread = next(d for d in indexed if f":{F.GENERAL_CHANNEL}:" in d)
        ops, ops_secure, hr = (f"jira:{SITE}:{n}" for n in ("1", "2", "3"))

        def verdict(who: str, doc: str) -> tuple[bool, str]:
            found = explain(find_person(directory, who), doc, indexed[doc].acl, directory)  # type: ignore[arg-type]
            return found.visible, " | ".join(found.because)

        cases = {
            (F.ALICE, general_thread): (True, "member of Slack workspace T0CRAFTED, which admits members of Slack"),
            (GUEST, general_thread): (False, "is a guest: guests read only the private channels they are in"),
            (F.EXTERNAL_USER, shared_thread): (True, "external member of shared channel #partner-shared"),
            (F.EXTERNAL_USER, general_thread): (False, "restricted to members of Slack workspace T0CRAFTED"),
            (F.CAROL, VPN_THREAD): (True, "is a member of private channel #security (G0PRIVATE1), as of the directory"),
            (GUEST, VPN_THREAD): (True, "is a member of private channel #security"),
            (F.BOB, VPN_THREAD): (False, f"members of private channel #security (G0PRIVATE1): {F.BOB} is not among"),
            (F.FRANK, general_thread): (False, "restricted to members of Slack workspace"),
            ("acc-alice", ops): (True, "Browse projects on OPS (directory file), which admits people who may browse"),
            ("acc-noemail", ops_secure): (False, "restricted to Jira security level 10001 on jira.crafted.test"),
            ("acc-alice", ops_secure): (True, "security level 10001 (directory file)"),
            (F.ALICE, hr): (False, "restricted to people who may browse Jira project HR"),
        }
        for (who, doc), (visible, reason) in cases.items():
            got_visible, because = verdict(who, doc)
            assert got_visible is visible and reason in because, (who, doc, because)

        # 200 random (person, document) pairs: explain says exactly what the search filter admits, and a real
        # BM25 search for the document's own words returns it exactly when explain says it is visible.
        people = [F.ALICE, F.BOB, F.CAROL, F.DAVE, F.FRANK, GUEST, F.EXTERNAL_USER, "acc-alice", "acc-noemail",
                  "bob@crafted.example", "acc-bobby"]  # fmt: skip
        texts = {d.id: d.title for d in jira_documents()}
        texts.update({d.id: d.text for d in read_threads(emu, F.GENERAL_CHANNEL, F.SHARED_CHANNEL, F.PRIVATE_CHANNEL)})
        rng = random.Random(33)
        retriever = Retriever(store, Bm25Encoder())
        seen = {True: 0, False: 0}
        for _ in range(200):
            who, doc = rng.choice(people), rng.choice(sorted(indexed))
            person = find_person(directory, who)
            visible = verdict(who, doc)[0]
            assert visible is _visible_by_search(store, person.principal(), doc), (who, doc)
            found = retriever.search(texts[doc][:200], "bm25", person.principal(), top_k=100).results
            assert (doc in {r.document_id for r in found}) is visible, (who, doc)
            seen[visible] += 1
        assert min(seen.values()) > 30, seen
    finally:
        store.close()


def test_a_member_removed_from_a_private_channel_stops_seeing_it_after_the_next_sync(
    emu: SlackEmulator, tmp_path: Path
) -> None:
    directory = DirectoryStore(tmp_path / "directory.sqlite")
    store = _index(emu, tmp_path / "qdrant")
    retriever = Retriever(store, Bm25Encoder())
    try:
        first = sync_directory(slack_directory.read_api_directory(reader(emu)), directory, store)
        assert first.change.previous_at is None and first.acl_lag_seconds is None

        def carol_finds_it() -> bool:
            carol = find_person(directory, "carol@crafted.example").principal()
            found = retriever.search("Rotating the VPN certificates", "bm25", carol, top_k=10).results
            return VPN_THREAD in {r.document_id for r in found}

        assert carol_finds_it()
        with emu.workspace.lock:
            emu.workspace.channel(F.PRIVATE_CHANNEL).members.remove(F.CAROL)
        second = sync_directory(slack_directory.read_api_directory(reader(emu)), directory, store)
        assert VPN_THREAD in second.acl_documents_updated
        assert list(second.change.channels) == [F.PRIVATE_CHANNEL]
        assert second.acl_lag_seconds is not None and 0 <= second.acl_lag_seconds < 30
        assert second.acl_lag_bound_seconds is not None and second.acl_lag_bound_seconds >= second.acl_lag_seconds
        assert second.as_metadata()["acl_documents_updated"] == len(second.acl_documents_updated)
        assert not carol_finds_it()
        acl = store.indexed_documents(SearchFilter(document_ids=(VPN_THREAD,)))[VPN_THREAD].acl
        assert acl is not None and F.CAROL not in acl.users
        because = explain(find_person(directory, F.CAROL), VPN_THREAD, acl, directory).because
        assert any("is not among them" in b for b in because), because
        # Nothing changed since: the next sync rewrites nothing.
        third = sync_directory(slack_directory.read_api_directory(reader(emu)), directory, store)
        assert third.acl_documents_updated == [] and third.change.memberships_changed == 0
    finally:
        store.close()


def test_the_service_resolves_callers_through_the_directory(emu: SlackEmulator, tmp_path: Path) -> None:
    store = _directory(emu, tmp_path)
    lookup = DirectoryLookup(store.path)
    reader_ = resolve_reader(None, "ALICE.ANDERS@crafted.example", None, trusted_proxy=False, directory=lookup)
    assert reader_.groups_from == "directory" and MEMBERS in reader_.principal.groups
    assert set(reader_.principal.all_user_ids()) == {F.ALICE, "acc-alice"}
    assert resolve_reader(F.ALICE, "alice.anders@crafted.example", None, trusted_proxy=False, directory=lookup)
    with pytest.raises(IdentityError) as two_people:
        resolve_reader(F.BOB, "alice.anders@crafted.example", None, trusted_proxy=False, directory=lookup)
    assert two_people.value.status == 400 and two_people.value.field == "X-User-Id"
    # Unknown to the directory: the bare id, no groups (public documents and those naming it).
    stranger = resolve_reader("U0STRANGER", None, None, trusted_proxy=False, directory=lookup)
    assert stranger.groups_from == "none" and stranger.principal.groups == ()
    # A forged group header is still refused without a trusted proxy, directory or not.
    with pytest.raises(IdentityError):
        resolve_reader(F.ALICE, None, MEMBERS, trusted_proxy=False, directory=lookup)
    # A later sync is seen by the next lookup (the cache follows the file).
    assert MEMBERS in (lookup(F.DAVE) or reader_.principal).groups
    with emu.workspace.lock:
        next(u for u in emu.workspace.users if u["id"] == F.DAVE)["deleted"] = True
    store.replace(slack_directory.read_api_directory(reader(emu)))
    dave = lookup(F.DAVE)
    assert dave is not None and dave.groups == () and dave.all_user_ids() == ()


def test_directory_asset_in_dagster(emu: SlackEmulator, tmp_path: Path) -> None:
    emu.workspace.write_export(tmp_path / "export")
    asset = build_directory_asset("slack")
    resources = {
        "slack_source": SlackExportResource(path=str(tmp_path / "export"), team_id=F.CRAFTED_TEAM),
        "directory": DirectoryResource(path=str(tmp_path / "directory.sqlite")),
        "qdrant": QdrantResource(path=str(tmp_path / "qdrant")),
    }
    result = dg.materialize([asset], resources=resources)
    assert result.success
    metadata = result.asset_materializations_for_node("slack_directory")[0].metadata
    assert metadata["accounts"].value == len(slack_directory.read_api_directory(reader(emu)).accounts)
    assert metadata["records_skipped"].value == 2
    checks = result.get_asset_check_evaluations()
    assert [(c.check_name, c.passed) for c in checks] == [("records_usable", False)]
    assert find_person(DirectoryStore(tmp_path / "directory.sqlite"), GUEST).accounts[0].status == "guest"


def test_whois_and_explain_commands(emu: SlackEmulator, tmp_path: Path, monkeypatch, capsys) -> None:
    from rag_pipeline.cli import main

    data = tmp_path / "data"
    _directory(emu, tmp_path).path.rename(data.mkdir() or data / "directory.sqlite")
    store = _index(emu, data / "qdrant")
    claim_dense_model(store, UNLOADABLE_MODEL)
    store.close()
    monkeypatch.setenv("RAG_DATA_DIR", str(data))
    monkeypatch.setenv("RAG_DENSE_MODEL", UNLOADABLE_MODEL)

    assert main(["whois", "alice.anders@crafted.example", "--json"]) == 0
    person = json.loads(capsys.readouterr().out)
    assert person["ids"] == {"jira": ["acc-alice"], "slack": [F.ALICE]}
    assert person["emails"] == ["alice.anders@crafted.example"]
    assert set(person["groups"]) >= {MEMBERS, OPS, SECURE}
    assert {"group": OPS, "because": "Browse projects on OPS (directory file)"} in person["grants"]
    assert [c["name"] for c in person["channels"]] == ["security"] and set(person["synced"]) == {"jira", "slack"}

    assert main(["explain", "--user", F.BOB, VPN_THREAD, "--json"]) == 0
    hidden = json.loads(capsys.readouterr().out)
    assert hidden["visible"] is False and hidden["synced"] and any("not among them" in b for b in hidden["because"])
    assert main(["explain", "--user", F.CAROL, VPN_THREAD]) == 0
    assert capsys.readouterr().out.startswith(f"visible: {VPN_THREAD} for carol")
    assert main(["explain", "--user", F.CAROL, "slack:T0CRAFTED:C0NOPE:1.0"]) == 2
    assert "no document 'slack:T0CRAFTED:C0NOPE:1.0' in the index" in capsys.readouterr().err
    assert main(["whois", "nobody@crafted.example"]) == 2
    assert "no account in the directory has the email or id" in capsys.readouterr().err


def test_eval_set_lines_may_name_a_person(emu: SlackEmulator, tmp_path: Path) -> None:
    from rag_pipeline.directory.lookup import person_resolver
    from rag_pipeline.evaluation.eval_set import load_eval_set

    store = _directory(emu, tmp_path)
    path = tmp_path / "acl.jsonl"
    lines = [
        {"id": "q1", "query": "vpn", "relevant": {VPN_THREAD: 1}, "principal": {"person": "CAROL@crafted.example"}},
        {"id": "q2", "query": "vpn", "relevant": {VPN_THREAD: 1}, "principal": {"user_id": F.BOB}},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    carol, bob = load_eval_set(path, person_resolver(store.path))
    assert carol.person == "CAROL@crafted.example" and carol.principal is not None
    assert carol.principal.user_id == F.CAROL and MEMBERS in carol.principal.groups
    assert bob.principal is not None and bob.principal.groups == ()
    with pytest.raises(ValueError, match=r"acl\.jsonl:1: the principal names the person 'CAROL@crafted\.example'"):
        load_eval_set(path)
    lines[0]["principal"] = {"person": "nobody@crafted.example"}
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with pytest.raises(ValueError, match=r"acl\.jsonl:1: .*knows no person 'nobody@crafted\.example'"):
        load_eval_set(path, person_resolver(store.path))
    lines[0]["principal"] = {"person": "carol@crafted.example", "groups": ["slack:T0CRAFTED:members"]}
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with pytest.raises(ValueError, match=r"(?s)acl\.jsonl:1: invalid eval query: .*a person principal is"):
        load_eval_set(path, person_resolver(store.path))


def test_the_directory_command_refreshes_and_reports_what_it_skipped(
    emu: SlackEmulator, tmp_path: Path, monkeypatch, capsys
) -> None:
    from rag_pipeline.cli import main

    emu.workspace.write_export(tmp_path / "export")
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_SLACK_EXPORT", str(tmp_path / "export"))
    monkeypatch.setenv("SLACK_TEAM_ID", F.CRAFTED_TEAM)
    assert main(["directory", "--offline", "--source", "slack", "--json"]) == 0
    (done,) = json.loads(capsys.readouterr().out)
    assert done["source"] == "slack" and done["accounts"] > 5 and done["records_skipped"] == len(done["skipped"]) == 2
    assert any("not an email" in s for s in done["skipped"])
    assert find_person(DirectoryStore(tmp_path / "data" / "directory.sqlite"), GUEST).accounts[0].status == "guest"
