"""The Confluence dump reader (one bad line keeps the rest, trashed pages reported, ACLs from the dump's own
restrictions) and the directory: from the API (space grants, restricted chains as intersections, a failed space
read keeping its previous holds) and from a dump plus a directory file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from rag_pipeline.connectors.confluence.acl import confluence_group, restricted_group, space_group
from rag_pipeline.connectors.confluence.directory import read_api_directory, read_dump_directory
from rag_pipeline.connectors.confluence.dump import ConfluenceDumpReader
from rag_pipeline.connectors.confluence.settings import ConfluenceSettings
from rag_pipeline.env_values import EnvValues
from rag_pipeline.sources.document import Acl
from rag_pipeline_tests.kit.confluence_fixtures import SITE, crafted_site, reader
from rag_pipeline_tests.kit.emulators.confluence_api import ConfluenceEmulator, dump_lines

EXPAND = (
    "body.storage,ancestors,space,version,history,metadata.labels,"
    "restrictions.read.restrictions.user,restrictions.read.restrictions.group"
)
ENG, R2002, R2003 = space_group(SITE, "ENG"), restricted_group(SITE, "2002"), restricted_group(SITE, "2003")


def doc_id(page: str) -> str:
    return f"confluence:{SITE}:{page}"


def write_dump(tmp_path: Path, extra: list[str] | None = None, gz: bool = True) -> Path:
    site = crafted_site()
    site.contents["4001"].status = "trashed"
    with ConfluenceEmulator(site) as emu:
        lines = dump_lines(emu, EXPAND)
    lines[5:5] = extra or []
    path = tmp_path / ("dump.jsonl.gz" if gz else "dump.jsonl")
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_dump_reads_pages_with_comments_and_acls(tmp_path: Path) -> None:
    read = ConfluenceDumpReader(write_dump(tmp_path), SITE).read()
    docs = {d.id: d for d in read.documents}
    assert read.problems == []
    assert set(docs) == {doc_id(p) for p in ("2001", "2002", "2003", "2004", "2005", "2006", "3001")}
    assert read.removed == [doc_id("4001")]  # trashed: not indexed, reported for reconciliation
    home = docs[doc_id("2001")]
    assert home.container == "ENG" and home.title == "Engineering › Home"
    assert 'Alice Anders (2024-03-01, inline on "dry-run"): typo here' in home.text
    assert home.metadata["labels"] == ["deploy", "howto"] and home.metadata["version_number"] == 3
    assert home.metadata["comment_count"] == 2 and home.authors == ("Alice Anders", "Bob Builder")
    # The dump's base is another host (the emulator): the link keeps its context path, on the site.
    assert home.url == f"https://{SITE}/wiki/spaces/ENG/pages/2001"
    assert docs[doc_id("2004")].acl == Acl(groups=(R2003,), restricted_to=(ENG,))
    assert docs[doc_id("3001")].acl == Acl(public=True)
    assert home.version == home.updated.timestamp()


def test_one_bad_line_keeps_the_rest(tmp_path: Path) -> None:
    bad = ['{"id": "9001", "type": "page", "title": broken', '{"id": "9002", "type": "page", "title": "No space"}']
    read = ConfluenceDumpReader(write_dump(tmp_path, bad, gz=False), SITE).read()
    assert len(read.documents) == 7
    reasons = {p.location.rsplit(":", 1)[-1]: p.reason for p in read.problems}
    assert any("9001" in loc for loc in reasons) and any("9002" in loc for loc in reasons)


def test_dump_page_without_restrictions_fails_closed(tmp_path: Path) -> None:
    site = crafted_site()
    with ConfluenceEmulator(site) as emu:
        lines = [line for line in dump_lines(emu, EXPAND) if json.loads(line).get("id") != "2001"]
    path = tmp_path / "partial.jsonl"
    path.write_text("\n".join(lines) + "\n")
    read = ConfluenceDumpReader(path, SITE).read()
    docs = {d.id: d for d in read.documents}
    # Home's line is missing: every page under it cannot know its chain, and admits nobody.
    assert docs[doc_id("2002")].acl == Acl() and docs[doc_id("2006")].acl == Acl(groups=(ENG,))
    assert any("ancestor 2001" in p.reason and "2002" in p.location for p in read.problems)


def test_api_directory_grants_spaces_and_intersected_chains() -> None:
    with ConfluenceEmulator(crafted_site()) as emu:
        snapshot = read_api_directory(reader(emu))
    a = snapshot.accounts
    assert a["acc-alice"].groups[ENG] == "View space ENG via group eng"
    assert a["acc-alice"].email == "alice@crafted.example"
    assert a["acc-erin"].groups == {space_group(SITE, "HR"): "View space HR as a named user"}
    assert R2002 in a["acc-bob"].groups and R2002 in a["acc-dave"].groups and R2002 not in a["acc-alice"].groups
    # 2003's chain: {bob, dave} (2002) ∩ {dave} (leads, 2003).
    assert R2003 in a["acc-dave"].groups and R2003 not in a["acc-bob"].groups
    assert a["acc-dave"].groups[R2003] == "passes the view restrictions of page 2002, page 2003"
    assert confluence_group(SITE, "leads") in a["acc-dave"].groups
    assert snapshot.problems == [] and snapshot.api_calls > 0
    # The ACL of Deep (2004) admits Dave only.
    acl = Acl(groups=(R2003,), restricted_to=(ENG,))
    assert [n for n, acc in sorted(a.items()) if acl.admits(n, set(acc.groups))] == ["acc-dave"]


def test_a_failed_space_read_keeps_previous_holds() -> None:
    site = crafted_site()
    with ConfluenceEmulator(site) as emu:
        previous = read_api_directory(reader(emu))
        site.users["acc-bob"].groups.remove("secret-team")  # a real revocation elsewhere still applies...
        site.users["acc-carol"].groups.remove("hr")
        emu.inject("500", path="/space/HR", times=50)  # ...but HR cannot be read: nothing of it is revoked
        snapshot = read_api_directory(reader(emu, max_retries=0), previous=previous)
    a = snapshot.accounts
    assert space_group(SITE, "HR") in a["acc-carol"].groups and space_group(SITE, "HR") in a["acc-erin"].groups
    assert R2002 not in a["acc-bob"].groups
    assert any(p.location == "confluence space HR" for p in snapshot.problems)


def test_dump_directory_with_directory_file(tmp_path: Path) -> None:
    directory = tmp_path / "directory.csv"
    directory.write_text(
        "account_id,email,groups\nacc-bob,bob@crafted.example,eng;secret-team\nacc-dave,,eng;leads\n"
        "acc-zed,zed@crafted.example,space:PUB\n,nobody@x.example,eng\n"
    )
    snapshot = read_dump_directory(write_dump(tmp_path), SITE, directory)
    a = snapshot.accounts
    assert ENG in a["acc-bob"].groups and R2002 in a["acc-bob"].groups and R2003 not in a["acc-bob"].groups
    assert R2003 in a["acc-dave"].groups
    assert a["acc-alice"].status == "named"  # an author the dump names, no membership known
    assert len(snapshot.problems) == 1  # the row without an id


def test_settings_from_env_keep_secrets_out() -> None:
    env = EnvValues({"CONFLUENCE_URL": "https://acme.atlassian.net/wiki", "CONFLUENCE_USERNAME": "me@acme.test",
                     "CONFLUENCE_API_TOKEN": "s3cret", "CONFLUENCE_SPACE_DENY": "ARCH, OLD",
                     "RAG_CONFLUENCE_DUMP": "/tmp/c.jsonl"})  # fmt: skip
    settings = ConfluenceSettings.from_env(env)
    assert settings.api is not None and settings.api.cloud and settings.api.api_token_set
    assert settings.api.space_deny == ("ARCH", "OLD")
    assert "s3cret" not in settings.model_dump_json()
    assert settings.api_address() == ("https://acme.atlassian.net/wiki", "CONFLUENCE_URL")
    assert [c.option for c in settings.inputs()] == ["--confluence-dump"]
    dc = ConfluenceSettings.from_env(EnvValues({"CONFLUENCE_URL": "https://wiki.acme.test", "CONFLUENCE_PAT": "p"}))
    assert dc.api is not None and not dc.api.cloud
