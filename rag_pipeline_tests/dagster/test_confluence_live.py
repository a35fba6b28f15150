"""Confluence end to end through the real Dagster machinery and the real atlassian-python-api client against the
Confluence REST emulator: ``rag-pipeline sync`` reads the spaces' pages by date window, ``directory`` reads who
may view each space and who passes each restricted chain, searches honour the space permissions and the inherited
view restrictions, ``explain`` names what decides, and the reconciliation asset removes a deleted page and applies
a lifted restriction in place.

The crafted site (kit/confluence_fixtures.py): ENG viewable by group eng; Home (2001) > Secret (2002, restricted to
group secret-team and user dave) > Secret child (2003, restricted to group leads) > Deep (2004); Secret > Under
secret (2005); HR viewable by group hr and erin; PUB anonymous. alice: eng; bob: eng + secret-team; dave: eng +
leads; carol: hr; erin: named on HR only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rag_pipeline.connectors.confluence.acl import restricted_group
from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.confluence.resources import ConfluenceResource
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames, SearchFilter
from rag_pipeline_tests.kit.confluence_fixtures import SITE, TOKEN, USER, crafted_site
from rag_pipeline_tests.kit.emulators.confluence_api import ConfluenceEmulator
from rag_pipeline_tests.kit.pipeline import resources, settings_for, spec

EMAILS = {
    "alice": "alice@crafted.example",
    "bob": "bob@crafted.example",
    "carol": "carol@crafted.example",
    "dave": "dave@crafted.example",
    "erin": "erin@crafted.example",
}


def _doc(page: str) -> str:
    return f"confluence:{SITE}:{page}"


@pytest.fixture
def emulator() -> Any:
    with ConfluenceEmulator(crafted_site()) as emu:
        yield emu


@pytest.fixture
def live_env(emulator: ConfluenceEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    values = {"CONFLUENCE_URL": emulator.url, "CONFLUENCE_USERNAME": USER, "CONFLUENCE_API_TOKEN": TOKEN,
              "CONFLUENCE_SITE": SITE, "DAGSTER_HOME": str(tmp_path / "home")}  # fmt: skip
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "home").mkdir()
    return tmp_path / "data"


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    from rag_pipeline.cli import main

    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip().startswith(("{", "[")) else out


def _found(capsys: pytest.CaptureFixture[str], data: Path, who: str, query: str) -> list[str]:
    code, out = _main(capsys, "search", "--data-dir", str(data), "--user", EMAILS[who], query, "--json",
                      "--mode", "bm25", "--top-k", "20", "--source", "confluence")  # fmt: skip
    assert code == 0
    return [r["document_id"] for r in out["results"]]


def test_sync_then_every_reader_sees_exactly_what_confluence_lets_them(
    live_env: Path, emulator: ConfluenceEmulator, capsys: pytest.CaptureFixture[str]
) -> None:
    data = live_env
    code, synced = _main(capsys, "sync", "--source", "confluence", "--start", "2024-03-01", "--end", "2024-03-05",
                         "--data-dir", str(data), "--json")  # fmt: skip
    assert code == 0, synced
    assert synced["documents"] == 8 and synced["failed"] == {} and synced["api_calls"] > 0
    assert TOKEN not in json.dumps(synced)
    code, directory = _main(capsys, "directory", "--source", "confluence", "--data-dir", str(data), "--json")
    assert code == 0, directory

    # Each page's own words, so a hit is that page and nothing else.
    words = {"2001": "deploy guide release", "2002": "launch codes", "2003": "deeper", "2004": "deepest",
             "2005": "sibling", "4001": "leave policy", "3001": "hello world"}  # fmt: skip
    sees = {who: {page for page, query in words.items() if _doc(page) in _found(capsys, data, who, query)}
            for who in EMAILS}  # fmt: skip
    assert sees["alice"] == {"2001", "3001"}  # eng: Home; the restricted subtree is hidden
    assert sees["bob"] == {"2001", "2002", "2005", "3001"}  # secret-team passes 2002, not 2003 (leads)
    assert sees["dave"] == {"2001", "2002", "2003", "2004", "2005", "3001"}  # named on 2002, leads on 2003
    assert sees["carol"] == {"4001", "3001"}  # hr
    assert sees["erin"] == {"4001", "3001"}  # a user named on the HR space, no group
    # A restricted ancestor hides every descendant, restricted or not: Deep (2004) has no restriction of its own.
    assert "2004" not in sees["bob"]

    # A directory sync that cannot read the secret-team group keeps what the last one recorded: bob still passes
    # Secret's restriction (never revoked on a failed read), and alice still does not (never granted).
    emulator.inject("403", path="/group/secret-team/member", times=100)
    code, again = _main(capsys, "directory", "--source", "confluence", "--data-dir", str(data), "--json")
    assert code == 0, again
    assert _doc("2002") in _found(capsys, data, "bob", "launch codes")
    assert _doc("2002") not in _found(capsys, data, "alice", "launch codes")

    code, alice = _main(capsys, "explain", "--data-dir", str(data), "--user", EMAILS["alice"], _doc("2002"), "--json")
    assert code == 0 and alice["visible"] is False
    assert any("every view restriction down to Confluence page 2002" in b for b in alice["because"])
    code, bob = _main(capsys, "explain", "--data-dir", str(data), "--user", EMAILS["bob"], _doc("2002"), "--json")
    assert bob["visible"] is True and any("may view Confluence space ENG" in b for b in bob["because"])


def _store(data_dir: Path) -> EdgeVectorStore:
    return EdgeVectorStore(data_dir / "qdrant", CollectionNames.with_prefix("rag"))


def test_reconciliation_removes_a_deleted_page_and_applies_a_lifted_restriction(
    live_env: Path, emulator: ConfluenceEmulator, capsys: pytest.CaptureFixture[str]
) -> None:
    data = live_env
    code, synced = _main(capsys, "sync", "--source", "confluence", "--start", "2024-03-01", "--end", "2024-03-05",
                         "--data-dir", str(data), "--space", "ENG", "--json")  # fmt: skip
    assert code == 0 and synced["documents"] == 6
    with _store(data) as store:
        before = store.indexed_documents(SearchFilter(sources=("confluence",), containers=("ENG",)))
    assert before[_doc("2005")].acl is not None
    assert restricted_group(SITE, "2002") in before[_doc("2005")].acl.groups

    site = emulator.site
    site.contents["2006"].status = "trashed"  # the blog post goes to the trash
    site.contents["2002"].read_groups, site.contents["2002"].read_users = [], []  # Secret's restriction lifted
    site.contents["2004"].parent = "2001"  # Deep moved from under Secret child to under Home: same version
    settings = settings_for(data)
    res = resources(data, live=False)
    res["confluence"] = res["confluence_source"] = ConfluenceResource(
        url=emulator.url, username=USER, api_token=TOKEN, site=SITE
    )
    reconciliation = spec("confluence", settings).live_definitions.reconciliation
    with dg.instance_for_test() as instance:
        config = {"ops": {"confluence_reconciliation": {"config": {"spaces": ["ENG"]}}}}
        done = dg.materialize([reconciliation], instance=instance, resources=res, run_config=config)
        assert done.success
        materialized = done.asset_materializations_for_node("confluence_reconciliation")[0]
        meta = {k: v.value for k, v in materialized.metadata.items()}
    assert meta["documents_removed"] == 1 and meta["documents_rewritten"] >= 1
    with _store(data) as store:
        after = store.indexed_documents(SearchFilter(sources=("confluence",), containers=("ENG",)))
    assert _doc("2006") not in after and set(after) == set(before) - {_doc("2006")}
    # Under secret now answers to the space alone; Secret child keeps its own (leads) restriction.
    assert after[_doc("2005")].acl is not None and after[_doc("2005")].acl.groups == {f"confluence:{SITE}:space:ENG"}
    assert restricted_group(SITE, "2003") in (after[_doc("2003")].acl.groups if after[_doc("2003")].acl else ())
    # The moved page: its new title path, and the space alone decides (no restricted ancestor any more).
    with _store(data) as store:
        refs = store.document_points(store.names.parents, [_doc("2004")])
        texts = [h.payload for h in store.retrieve(store.names.parents, [r.id for r in refs])]
    assert texts and all("Home › Deep" in p["title"] and "Secret" not in p["title"] for p in texts)
    assert after[_doc("2004")].acl is not None and after[_doc("2004")].acl.groups == {f"confluence:{SITE}:space:ENG"}


def test_live_confluence_definitions_only_with_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONFLUENCE_URL", raising=False)
    offline = build_definitions(settings_for())
    assert not offline.resolve_asset_graph().has(dg.AssetKey("confluence_reconciliation"))
    assert offline.resources["confluence_source"] is offline.resources["confluence_dump"]
    monkeypatch.setenv("CONFLUENCE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CONFLUENCE_USERNAME", USER)
    monkeypatch.setenv("CONFLUENCE_API_TOKEN", TOKEN)
    live = build_definitions(settings_for())
    dg.Definitions.validate_loadable(live)
    graph = live.resolve_asset_graph()
    assert graph.get(dg.AssetKey("confluence_pages")).pools == {"confluence_api"}
    assert live.resolve_schedule_def("confluence_reconciliation_schedule").cron_schedule == "0 4 * * *"
    assert live.resolve_sensor_def("confluence_space_discovery_sensor") is not None
    assert TOKEN not in repr(live.resources["confluence"])
