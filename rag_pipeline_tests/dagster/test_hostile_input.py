"""Crafted exports and dumps through the real readers and assets: every hostile record is reported with its
location, every other record is still read (and indexed), and nothing is read outside the export.

Each case of the issue "Survive crashes, hostile input and concurrent use" (bad input part) has a test here;
the end-to-end tests run the real Dagster assets on a crafted source and check the run succeeds with
``bad_records`` > 0 while the good records land in the index.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pytest

from rag_pipeline.connectors.jira.dump import JiraDumpReader, issue_to_document
from rag_pipeline.connectors.jira.markup import adf_to_text
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.defs.chain.discovery import build_offline_source_discovery_sensor
from rag_pipeline.defs.jira.resources import JiraDumpResource
from rag_pipeline.defs.slack.resources import SlackExportResource
from rag_pipeline.sources.document import Acl, Document, content_hash, epoch_to_datetime
from rag_pipeline.sources.problems import RecordProblem, UnreadableSource
from rag_pipeline.sources.source_read import admit_documents
from rag_pipeline.text.clean import clean_text, clean_title
from rag_pipeline_tests.kit.data import D1, D2, TEAM, jira_issue, ts, write_jira_dump, write_slack_export
from rag_pipeline_tests.kit.hostile import (
    HOSTILE_ID,
    SECRET,
    SITE,
    deep_adf_json,
    issue_line,
    msg,
    outside_folder,
)
from rag_pipeline_tests.kit.pipeline import cell, chain, resources, settings_for, spec


def _problems(problems: list[RecordProblem], needle: str) -> list[str]:
    return [str(p) for p in problems if needle in str(p)]


def _texts(docs: list[Document]) -> str:
    return "\n".join(d.text for d in docs)


# --- what the reader opens ----------------------------------------------------------------------------------------
_OPENED: list[list[str]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED and event in ("open", "os.listdir", "os.scandir") and args:
        path = args[0]
        if isinstance(path, str | bytes | os.PathLike):
            _OPENED[-1].append(os.fsdecode(path))


# An audit hook cannot be removed; it records only while a test is inside ``opened_paths``.
if not getattr(sys, "_rag_hostile_input_hook", False):
    sys.addaudithook(_audit)
    sys._rag_hostile_input_hook = True  # type: ignore[attr-defined]


@contextmanager
def opened_paths() -> Iterator[list[str]]:
    """Every path opened or listed (files and folders, through any API that Python audits) inside the block."""
    _OPENED.append([])
    try:
        yield _OPENED[-1]
    finally:
        _OPENED.pop()


def _inside(path: str, root: Path) -> bool:
    resolved = Path(path).resolve()
    return resolved == root.resolve() or resolved.is_relative_to(root.resolve())


# --- Slack: ids and names ----------------------------------------------------------------------------------------
def test_slack_hostile_channel_ids_are_refused_at_entry(tmp_path: Path) -> None:
    export = write_slack_export(tmp_path / "export", {"2024-03-01": [msg(D1 + 100, "good thread")]})
    channels = [
        {"id": "C0PUB", "name": "general"},
        {"id": HOSTILE_ID, "name": "evil"},
        {"id": "C0PUB|2024-03-01", "name": "pipe"},
        {"id": "C" * 65, "name": "long"},
        {"name": "no-id"},
    ]
    (export / "channels.json").write_text(json.dumps(channels))
    for name in ("evil", "pipe", "long", "no-id"):
        (export / name).mkdir()
        (export / name / "2024-03-01.json").write_text(json.dumps([msg(D1 + 200, f"from {name}")]))
    read = SlackExportReader(export, TEAM).read()
    assert {d.container for d in read.documents} == {"C0PUB"}
    assert "good thread" in _texts(read.documents) and "from " not in _texts(read.documents)
    where = f"{export}/channels.json"
    assert _problems(read.problems, f"{where}[1]") and "'../../../../tmp/x' is not a valid id" in str(read.problems)
    assert _problems(read.problems, f"{where}[2]") and _problems(read.problems, f"{where}[3]")
    assert _problems(read.problems, f"{where}[4]: entry without an id")
    # Discovery (the only way channels become partitions) sees only the valid channel.
    sensor = build_offline_source_discovery_sensor([spec("slack")])
    with dg.instance_for_test() as instance:
        source = SlackExportResource(path=str(export), team_id=TEAM)
        result = sensor(dg.build_sensor_context(instance=instance, resources={"slack_export": source}))
    assert [r.partition_keys for r in result.dynamic_partitions_requests] == [["C0PUB"]]


def test_slack_channel_name_with_traversal_never_reads_outside_the_export(tmp_path: Path) -> None:
    outside = outside_folder(tmp_path)
    export = write_slack_export(tmp_path / "export", {})
    (export / "channels.json").write_text(json.dumps([{"id": "C0PUB", "name": "../outside"}]))
    (export / "C0PUB").mkdir()
    (export / "C0PUB" / "2024-03-01.json").write_text(json.dumps([msg(D1 + 100, "read from the id folder")]))
    with opened_paths() as opened:
        read = SlackExportReader(export, TEAM).read()
    assert SECRET not in _texts(read.documents) and "read from the id folder" in _texts(read.documents)
    assert _problems(read.problems, f"{export}/channels.json[0]: channel name '../outside' is not a folder name")
    assert opened and not [p for p in opened if _inside(p, outside)]


def test_slack_symlinked_channel_folder_never_reads_outside_the_export(tmp_path: Path) -> None:
    outside = outside_folder(tmp_path)
    export = write_slack_export(tmp_path / "export", {}, {"2024-03-01": [msg(D1 + 700, "private kept")]})
    (export / "general").rmdir()
    (export / "general").symlink_to(outside, target_is_directory=True)
    (export / "users.json").unlink()
    (export / "users.json").symlink_to(outside / "2024-03-01.json")
    with opened_paths() as opened:
        read = SlackExportReader(export, TEAM).read()
    assert SECRET not in _texts(read.documents) and "private kept" in _texts(read.documents)
    assert _problems(read.problems, f"{export}/general: OutsideExport")
    assert _problems(read.problems, f"{export}/users.json: unreadable: OutsideExport")
    assert not [p for p in opened if _inside(p, outside)]


def test_slack_zip_entries_with_traversal_names_are_ignored(tmp_path: Path) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("channels.json", json.dumps([{"id": "C0PUB", "name": "../outside"}, {"id": "C0TWO", "name": "ok"}]))
        zf.writestr("../outside/2024-03-01.json", json.dumps([msg(D1 + 50, SECRET)]))
        zf.writestr("/abs/2024-03-01.json", json.dumps([msg(D1 + 60, SECRET)]))
        zf.writestr("ok/../../outside/2024-03-01.json", json.dumps([msg(D1 + 70, SECRET)]))
        zf.writestr("ok/2024-03-01.json", json.dumps([msg(D1 + 100, "zip thread")]))
    read = SlackExportReader(archive, TEAM).read()
    assert [(d.container, d.text) for d in read.documents] == [("C0TWO", "U1: zip thread")]
    assert _problems(read.problems, f"{archive}: 3 zip entries with names leading outside the export ignored")
    assert _problems(read.problems, "channel name '../outside' is not a folder name")


# --- Slack: records -----------------------------------------------------------------------------------------------
def test_slack_bad_messages_are_reported_and_the_rest_is_read(tmp_path: Path) -> None:
    day = [
        msg(D1 + 100, "good root"),
        {**msg(D1 + 110, "number ts"), "ts": D1 + 110.5},
        {**msg(D1 + 120, "infinite ts"), "ts": "inf"},
        {**msg(D1 + 130, "huge ts"), "ts": "1e20"},
        {**msg(D1 + 140, "negative ts"), "ts": "-5"},
        msg(D1 + 150, "kept despite a bad edit", edited="yesterday"),
        "not a message",
        msg(D1 + 160, "list subtype", subtype=["x"]),
        {**msg(D1 + 170, ""), "text": {"rich": True}},
        msg(D1 + 180, "bad profile is ignored", user=7, user_profile="nope"),
        msg(D1 + 190, "bad latest_reply is ignored", latest_reply="inf"),
    ]
    export = write_slack_export(tmp_path / "export", {"2024-03-01": day, "2024-03-02": [msg(D2 + 10, "next day")]})
    read = SlackExportReader(export, TEAM).read()
    text = _texts(read.documents)
    for kept in ("good root", "kept despite a bad edit", "bad profile is ignored", "bad latest_reply", "next day"):
        assert kept in text
    for dropped in ("number ts", "infinite ts", "huge ts", "negative ts", "list subtype"):
        assert dropped not in text
    where = f"{export}/general/2024-03-01.json"
    for index in (1, 2, 3, 4, 6, 7, 8):
        assert _problems(read.problems, f"{where}[{index}]: message not read"), index
    assert _problems(read.problems, f"{where}[5] (ts {ts(D1 + 150)}): edited 'yesterday' is not an edit record")
    assert _problems(read.problems, f"{where}[9] (ts {ts(D1 + 180)}): user 7 is malformed")
    assert _problems(read.problems, f"{where}[10] (ts {ts(D1 + 190)}): latest_reply 'inf'")
    edited = next(d for d in read.documents if "bad edit" in d.text)
    assert edited.version == pytest.approx(D1 + 150)  # the unreadable edit moves nothing


def test_slack_invalid_utf8_costs_a_character_not_the_file(tmp_path: Path) -> None:
    export = write_slack_export(tmp_path / "export", {})
    raw = json.dumps([msg(D1 + 100, "caf\u00e9 ok"), msg(D1 + 200, "second")]).encode()
    (export / "general" / "2024-03-01.json").write_bytes(raw.replace(b"ok", b"o\xffk"))
    read = SlackExportReader(export, TEAM).read()
    assert "o\ufffdk" in _texts(read.documents) and "second" in _texts(read.documents)
    assert _problems(read.problems, f"{export}/general/2024-03-01.json: invalid UTF-8 at byte")


def test_slack_missing_channels_manifest_is_reported_not_silent(tmp_path: Path) -> None:
    export = write_slack_export(
        tmp_path / "export", {"2024-03-01": [msg(D1 + 100, "public")]}, {"2024-03-01": [msg(D1 + 700, "private")]}
    )
    (export / "channels.json").unlink()
    read = SlackExportReader(export, TEAM).read()
    assert [d.container for d in read.documents] == ["G0PRIV"]
    problem = _problems(read.problems, f"{export}/channels.json: missing: public channels cannot be listed")
    assert problem and "1 folder(s) not read: general" in problem[0]


def test_slack_malformed_manifests_name_the_file(tmp_path: Path) -> None:
    export = write_slack_export(
        tmp_path / "export",
        {"2024-03-01": [msg(D1 + 100, "public")]},
        {"2024-03-01": [msg(D1 + 700, "private", user="U3")]},
    )
    (export / "channels.json").write_text("[{not json")
    (export / "users.json").write_text(json.dumps([{"name": "no id"}, "x", {"id": "U3", "real_name": "Carol C"}]))
    read = SlackExportReader(export, TEAM).read()
    assert [d.text for d in read.documents] == ["Carol C: private"]
    assert _problems(read.problems, f"{export}/channels.json: unreadable: JSONDecodeError")
    assert _problems(read.problems, f"{export}/users.json[0]: entry without an id")
    assert _problems(read.problems, f"{export}/users.json[1]: entry without an id")
    (export / "users.json").write_text("")
    read = SlackExportReader(export, TEAM).read()
    assert [d.text for d in read.documents] == ["U3: private"]
    assert _problems(read.problems, f"{export}/users.json: unreadable")
    # Parsed, but not a list: another format, not a bad record (test_skipped_report checks the command's error).
    (export / "groups.json").write_text(json.dumps({"not": "a list"}))
    with pytest.raises(UnreadableSource, match=r"groups\.json is a JSON object, not the list of objects"):
        SlackExportReader(export, TEAM)


def test_slack_channel_listed_twice_stays_private(tmp_path: Path) -> None:
    export = write_slack_export(tmp_path / "export", {})
    (export / "groups.json").write_text(json.dumps([{"id": "C0PUB", "name": "general", "members": ["U1"]}]))
    (export / "general" / "2024-03-01.json").write_text(json.dumps([msg(D1 + 100, "members only")]))
    read = SlackExportReader(export, TEAM).read()
    (doc,) = read.documents
    assert doc.acl == Acl(users=("U1",)) and _problems(read.problems, "channel C0PUB listed twice")


# --- Jira ---------------------------------------------------------------------------------------------------------
def test_jira_bad_lines_are_reported_and_the_rest_is_read(tmp_path: Path) -> None:
    march = "2024-03-01T10:00:00.000+0000"

    def with_project(issue: dict[str, Any], key: str) -> dict[str, Any]:
        issue["fields"]["project"]["key"] = key
        return issue

    issues = [
        jira_issue("1", "AC-1", march, description="good one"),  # line 1
        with_project(jira_issue("2", "AC-2", march), HOSTILE_ID),  # 2
        with_project(jira_issue("3", "AC-3", march), "A|B"),  # 3
        jira_issue("4", "AC-4", "0001-01-01T00:00:00.000+0100"),  # 4
        jira_issue("5", "AC-5", 12345),  # 5
        jira_issue("6", "AC-6", march, summary="\u202eexe.txt bidi"),  # 6
        jira_issue("1", "AC-1", "2024-03-02T10:00:00.000+0000", description="good one, newer copy"),  # 7
        jira_issue("8", "AC-8", march, description="after the duplicate"),  # 8
        jira_issue("9", "../../x-1", march),  # 9
    ]
    deep = issue_line(jira_issue("10", "AC-10", march), deep_adf_json(5000, "five thousand levels"))  # 10
    parsable = issue_line(jira_issue("11", "AC-11", march), deep_adf_json(250, "two hundred fifty levels"))  # 11
    dump = write_jira_dump(tmp_path / "dump.jsonl.gz", issues, extra_lines=[deep, parsable])
    # One invalid UTF-8 byte in a line of its own (12), then a good issue (13).
    with gzip.open(dump, "ab") as handle:
        handle.write(
            json.dumps(jira_issue("12", "AC-12", march, description="bad byte here"))
            .encode()
            .replace(b"bad byte", b"bad \xff byte")
            + b"\n"
        )
        handle.write(json.dumps(jira_issue("13", "AC-13", march, description="last")).encode() + b"\n")
    read = JiraDumpReader(dump, SITE).read()
    keys = [d.metadata["key"] for d in read.documents]
    assert keys == ["AC-1", "AC-6", "AC-8", "AC-11", "AC-12", "AC-13"]
    assert "good one, newer copy" in read.documents[0].text
    where = f"{dump}:"
    assert _problems(read.problems, f"{where}2 (AC-2): InvalidIdentifier: project key of AC-2 '../../../../tmp/x'")
    assert _problems(read.problems, f"{where}3 (AC-3): InvalidIdentifier: project key of AC-3 'A|B'")
    assert _problems(read.problems, f"{where}4 (AC-4): ValueError: time 0001-01-01T00:00:00+01:00 is outside")
    assert _problems(read.problems, f"{where}5 (AC-5): ValueError: timestamp 12345 is not a string")
    assert _problems(read.problems, f"{where}7 (AC-1): issue id 1 also at {where}1 (AC-1)")
    assert _problems(read.problems, f"{where}9 ('../../x-1'): ValueError: issue key '../../x-1' is not")
    assert _problems(read.problems, f"{where}10 (AC-10): not read: JSON nested too deeply to parse")
    assert _problems(read.problems, f"{where}12 (AC-12): invalid UTF-8 at byte")
    assert len(read.problems) == 8
    docs = {d.metadata["key"]: d for d in read.documents}
    assert docs["AC-6"].title == "AC-6: exe.txt bidi" and "\u202e" not in docs["AC-6"].text
    assert "two hundred fifty levels" in docs["AC-11"].text
    assert "bad \ufffd byte" in docs["AC-12"].text


def _random_words(rng: random.Random, n: int) -> str:
    return " ".join(
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(n)
    )


def test_jira_truncated_gzip_keeps_what_was_read_and_says_where_it_broke(tmp_path: Path) -> None:
    rng = random.Random(7)
    issues = [
        jira_issue(str(i), f"AC-{i}", "2024-03-01T10:00:00.000+0000", description=_random_words(rng, 300))
        for i in range(1, 41)
    ]
    dump = write_jira_dump(tmp_path / "dump.jsonl.gz", issues)
    data = dump.read_bytes()
    dump.write_bytes(data[: len(data) // 2])
    read = JiraDumpReader(dump, SITE).read()
    (broken,) = [p for p in read.problems if "breaks off" in p.reason]
    kept = len(read.documents)
    assert 5 < kept < 40
    assert [d.metadata["key"] for d in read.documents] == [f"AC-{i}" for i in range(1, kept + 1)]
    assert "EOFError" in broken.reason and "the lines before it were read" in broken.reason
    # A partial last line, when one came out before the damage, is a problem of its own.
    assert len(read.problems) in (1, 2)

    # Damage in the middle of the stream (not only a short file) ends the same way.
    damaged = bytearray(data)
    damaged[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    dump.write_bytes(bytes(damaged))
    read = JiraDumpReader(dump, SITE).read()
    assert read.documents and read.problems
    assert [d.metadata["key"] for d in read.documents][:5] == ["AC-1", "AC-2", "AC-3", "AC-4", "AC-5"]


def test_adf_markup_conversion_is_recursion_safe() -> None:
    node: dict[str, Any] = {"type": "text", "text": "the deepest words"}
    for i in range(5000):
        node = {"type": "bulletList" if i % 2 else "listItem", "content": [node]}
    doc = {"type": "doc", "content": [node, {"type": "heading", "attrs": {"level": 10**9}, "content": []}]}
    text = adf_to_text(doc)
    assert "the deepest words" in text and len(text) < 1000
    # As the live reader hands it over (a parsed issue, no JSON depth limit in between).
    issue = jira_issue("1", "AC-1", "2024-03-01T10:00:00.000+0000", description=doc)
    assert "the deepest words" in issue_to_document(issue, SITE).text


# --- the checks every source shares --------------------------------------------------------------------------------
def _doc(doc_id: str, container: str, when: float, text: str = "text", version: float | None = None) -> Document:
    return Document(
        id=doc_id,
        source="slack",
        container=container,
        title=f"title \u202e{doc_id}",
        text=text,
        created=epoch_to_datetime(when),
        updated=epoch_to_datetime(when),
        version=version if version is not None else when,
        content_hash=content_hash(text),
        acl=Acl(public=True),
    )


def test_admit_documents_reports_days_duplicates_containers_and_size() -> None:
    docs = [
        _doc("a", "C0PUB", D1),
        _doc("old", "C0PUB", 0.0),  # 1970: before the first partition
        _doc("future", "C0PUB", 9_999_999_999.0),  # 2286: after the last
        _doc("bad", HOSTILE_ID, D1),
        _doc("a", "C0PUB", D1, version=D1 + 5),  # a newer copy of "a"
        _doc("big", "C0PUB", D1, text="x" * 5_000_000),
        _doc("elsewhere", "C0PUB", D2, text="y" * 5_000_000),  # not in the run: not truncated, not reported
    ]
    admitted = admit_documents(
        docs,
        day_of=lambda d: d.day,
        first_day="2004-01-01",
        last_day="2100-01-01",
        max_chars=1000,
        wanted=lambda day, container: day == "2024-03-01",
    )
    kept = {d.id: d for _, d in admitted.documents}
    assert sorted(kept) == ["a", "big"] and kept["a"].version == D1 + 5
    assert len(kept["big"].text) == 1000 and kept["big"].metadata["truncated_from_chars"] == 5_000_000
    assert kept["big"].content_hash == content_hash(kept["big"].text)
    reasons = [str(p) for p in admitted.problems]
    assert len(reasons) == 5
    assert any(r.startswith("old (") and "partition day 1970-01-01 is outside" in r for r in reasons)
    assert any(r.startswith("future (") and "2286-11-20 is outside" in r for r in reasons)
    assert any(r.startswith("bad (") and "'../../../../tmp/x' is not a valid id" in r for r in reasons)
    assert any(r.startswith("a (") and "read twice" in r for r in reasons)
    assert any(r.startswith("big (") and "5,000,000 characters truncated to 1,000" in r for r in reasons)


def test_invisible_format_characters_are_stripped() -> None:
    hostile = "evil\u202egnp.exe \u2066x\u2069\u200b\u00ad\U000e0041\u200f"
    assert clean_title(hostile + "\nsecond line") == "evilgnp.exe x second line"
    # Text keeps the directional marks (RLM) Arabic and Hebrew need, nothing that reorders or hides.
    assert clean_text(hostile) == "evilgnp.exe x\u200f"


# --- end to end: the real assets ---------------------------------------------------------------------------------
def _meta(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    return {k: v.value for k, v in result.asset_materializations_for_node(asset)[0].metadata.items()}


def test_end_to_end_slack_chain_indexes_good_records_and_reports_bad_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_MAX_DOCUMENT_CHARS", "1000")
    outside = outside_folder(tmp_path)
    day = [
        msg(D1 + 100, "my wifi drops after suspend"),
        msg(D1 + 110, "ignored", ts=D1 + 110.0),
        msg(D1 + 120, "ignored", ts="inf"),
        msg(D1 + 130, "ignored", ts="-5"),
        msg(D1 + 140, "bluetooth pairing fails \u202eevil", edited="yesterday"),
        msg(D1 + 150, "huge " + "word " * 1_000_000),
        msg(1.0, "from 1970, before the partitions"),
    ]
    export = write_slack_export(tmp_path / "export", {"2024-03-01": day})
    (export / "channels.json").write_text(
        json.dumps([{"id": "C0PUB", "name": "general"}, {"id": HOSTILE_ID, "name": "../outside"}])
    )
    data = tmp_path / "data"
    res = resources(data)
    res["slack_export"] = res["slack_source"] = SlackExportResource(path=str(export), team_id=TEAM)
    assets = chain("slack", settings_for(data))
    with dg.instance_for_test() as instance, opened_paths() as opened:
        sensor = build_offline_source_discovery_sensor([spec("slack")])
        added = sensor(dg.build_sensor_context(instance=instance, resources={"slack_export": res["slack_export"]}))
        assert [r.partition_keys for r in added.dynamic_partitions_requests] == [["C0PUB"]]
        instance.add_dynamic_partitions("slack_channels", ["C0PUB"])
        result = dg.materialize(
            assets, instance=instance, resources=res, **cell("slack_threads", "C0PUB", "2024-03-01")
        )
    assert result.success
    raw, points = _meta(result, "slack_threads"), _meta(result, "slack_qdrant_points")
    assert raw["documents"] == 3 and points["documents_written"] == 3
    examples = raw["bad_record_examples"]
    where = f"{export}/general/2024-03-01.json"
    assert raw["bad_records"] == 7
    for needle in (
        f"{export}/channels.json[1]",  # the hostile id, refused at entry
        f"{where}[1]: message not read",
        f"{where}[2]: message not read",
        f"{where}[3]: message not read",
        f"{where}[4] (ts {ts(D1 + 140)}): edited",
        "characters truncated to 1,000 (RAG_MAX_DOCUMENT_CHARS)",
        "partition day 1970-01-01 is outside the partitions",
    ):
        assert needle in examples, needle
    from rag_pipeline.index.edge_store import EdgeVectorStore
    from rag_pipeline.index.store import CollectionNames

    ids = [f"slack:{TEAM}:C0PUB:{ts(D1 + s)}" for s in (100, 140, 150)]
    with EdgeVectorStore(data / "qdrant", CollectionNames.with_prefix("rag")) as store:
        refs = store.document_points(store.names.parents, ids)
        payloads = [h.payload for h in store.retrieve(store.names.parents, [r.id for r in refs])]
    assert {p["document_id"] for p in payloads} == set(ids)
    assert "#general: bluetooth pairing fails evil" in {p["title"] for p in payloads}
    assert max(len(p["text"]) for p in payloads) <= 1000
    # Nothing was read from the folder the traversal name points at, nothing written outside the data folder.
    assert not [p for p in opened if _inside(p, outside)]
    stored = [pd.read_parquet(p) for p in (data / "parquet" / "slack_threads").glob("*.parquet")]
    assert stored and {c for frame in stored for c in frame["_container"]} == {"C0PUB"}
    assert not (tmp_path / "tmp").exists()


def test_end_to_end_jira_raw_asset_reports_issues_outside_the_partitions(tmp_path: Path) -> None:
    dump = write_jira_dump(
        tmp_path / "dump.jsonl.gz",
        [
            jira_issue("1", "AC-1", "2024-03-01T10:00:00.000+0000", description="kept"),
            jira_issue("2", "AC-2", "1999-12-31T10:00:00.000+0000", description="before the first partition"),
            jira_issue("3", "AC-3", "2024-03-01T11:00:00.000+0000", summary="key with pipe"),
        ],
    )
    lines = gzip.decompress(dump.read_bytes()).decode().splitlines()
    lines[2] = lines[2].replace('"key": "AC"', '"key": "AC|2024-03-01"')
    dump.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    data = tmp_path / "data"
    res = resources(data)
    res["jira_dump"] = res["jira_source"] = JiraDumpResource(path=str(dump), site=SITE)
    raw_asset = chain("jira", settings_for(data))[0]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("jira_projects", ["AC"])
        result = dg.materialize(
            [raw_asset], instance=instance, resources=res, **cell("jira_issues", "AC", "2024-03-01")
        )
    assert result.success
    raw = _meta(result, "jira_issues")
    assert raw["documents"] == 1 and raw["bad_records"] == 2
    examples = raw["bad_record_examples"]
    assert f"jira:{SITE}:2 (AC-2: Summary of AC-2): partition day 1999-12-31 is outside the partitions" in examples
    assert f"{dump}:3 (AC-3): InvalidIdentifier: project key of AC-3 'AC|2024-03-01'" in examples
