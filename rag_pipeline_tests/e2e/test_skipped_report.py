"""What ``rag-pipeline index`` skipped, told where the user looks, and the last ways bad input beat the pipeline.

Each case of the issue "Nothing dropped without a word" runs the real command line in a subprocess and checks
the exit status, the location and reason of each skipped record on stderr and in ``--json`` (``skipped``), the
full list under the data folder, and that the good records were indexed. Crafted inputs come from
``test_hostile_input``; the subprocess helpers from ``test_cli_errors``.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rag_pipeline.cli import main
from rag_pipeline.commands.arguments import iso_instant
from rag_pipeline.commands.errors import FAILURE, USAGE, explain
from rag_pipeline.connectors.jira.dump import JiraDumpReader
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames
from rag_pipeline.sources.problems import UnreadableSource
from rag_pipeline_tests.e2e.test_cli_errors import _assert_quiet, _clean_env, _one_error_line, _run_cli
from rag_pipeline_tests.e2e.test_concurrent_store import Processes
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.data import D1, TEAM, jira_issue, ts, write_jira_dump, write_slack_export
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace
from rag_pipeline_tests.kit.hostile import HOSTILE_ID, SITE, deep_adf_json, issue_line, msg, outside_folder

MARCH = "2024-03-01T10:00:00.000+0000"


def _index(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run_cli(["index", *args, "--data-dir", str(data)], _clean_env())


def _skipped(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    skipped: dict[str, Any] = json.loads(done.stdout)["skipped"]
    return skipped


def _assert_reported(done: subprocess.CompletedProcess[str], skipped: dict[str, Any], expected: list[str]) -> None:
    """Each ``<location>: <reason>`` prefix of ``expected`` is a line on stderr, an example in --json and a
    record of the full list, which the report names."""
    lines = [line.strip() for line in done.stderr.splitlines()]
    examples = [f"{e['location']}: {e['reason']}" for e in skipped["examples"]]
    report = Path(skipped["report"])
    listed = [json.loads(line) for line in report.read_text().splitlines()]
    assert len(listed) == skipped["count"]
    for needle in expected:
        assert any(line.startswith(needle) for line in lines), f"{needle!r} not on stderr:\n{done.stderr}"
        assert any(e.startswith(needle) for e in examples), f"{needle!r} not in --json: {examples}"
        assert any(f"{r['location']}: {r['reason']}".startswith(needle) for r in listed), needle
    assert f"skipped {skipped['count']} record(s):" in lines
    assert f"full list: {report} (and the raw assets' bad_records metadata in the Dagster UI)" in lines


def _document_ids(data: Path) -> set[str]:
    with EdgeVectorStore(data / "qdrant", CollectionNames.with_prefix("rag")) as store:
        return set(store.indexed_documents())


def _point_counts(data: Path) -> tuple[int, int]:
    with EdgeVectorStore(data / "qdrant", CollectionNames.with_prefix("rag")) as store:
        return store.count(store.names.parents), store.count(store.names.children)


# --- the report, for every kind of skipped record --------------------------------------------------------------


def test_index_reports_every_record_it_skipped_with_location_and_reason(tmp_path: Path) -> None:
    """Hostile channel ids refused at entry, a manifest entry without an id, a message that cannot be read and
    a folder that is a symlink leading out: each named with its reason; the good thread is indexed; exit 0.
    Run again, every range is skipped as unchanged and the report is the same."""
    outside = outside_folder(tmp_path)
    export = write_slack_export(
        tmp_path / "export", {"2024-03-01": [msg(D1 + 100, "wifi drops after suspend"), msg(D1 + 200, "x", ts="inf")]}
    )
    (export / "channels.json").write_text(
        json.dumps([{"id": "C0PUB", "name": "general"}, {"id": HOSTILE_ID, "name": "evil"}, {"name": "no-id"}])
    )
    (export / "secret").rmdir()
    (export / "secret").symlink_to(outside, target_is_directory=True)
    data = tmp_path / "data"
    done = _index(data, "--slack-export", str(export), "--slack-team", TEAM, "--json")
    skipped = _skipped(done)
    expected = [
        f"{export}/channels.json[1]: Slack channel id '{HOSTILE_ID}' is not a valid id",
        f"{export}/channels.json[2]: entry without an id",
        f"{export}/general/2024-03-01.json[1]: message not read",
        f"{export}/secret: OutsideExport: folder secret leads outside the export (a symlink); not read",
    ]
    _assert_reported(done, skipped, expected)
    assert skipped["count"] == 4 and Path(skipped["report"]).is_relative_to(data)
    assert {e["source"] for e in skipped["examples"]} == {"slack"}
    assert json.loads(done.stdout)["documents"] == 1
    assert _document_ids(data) == {f"slack:{TEAM}:C0PUB:{ts(D1 + 100)}"}
    _assert_quiet(done.stderr)

    again = _index(data, "--slack-export", str(export), "--slack-team", TEAM)
    assert again.returncode == 0, again.stderr
    assert "runs skipped (unchanged): 1" in again.stdout
    lines = [line.strip() for line in again.stderr.splitlines()]
    assert "skipped 4 record(s):" in lines and all(any(x.startswith(n) for x in lines) for n in expected)


@pytest.mark.slow  # a real index/sync run (~25 s): the default suite keeps the Slack report test
def test_index_reports_an_unreadable_jira_line_and_indexes_the_rest(tmp_path: Path) -> None:
    """A line whose ADF is nested 5,000 levels (the identity scan used to die on it with RecursionError) is
    that line's problem: named on stderr and in --json, the other issues indexed, exit 0. A valid --since
    then narrows a search, given as a day."""
    deep = issue_line(jira_issue("2", "AC-2", MARCH), deep_adf_json(5000, "five thousand levels"))
    dump = write_jira_dump(
        tmp_path / "dump.jsonl.gz",
        [
            jira_issue("1", "AC-1", MARCH, description="Build fails on Windows"),
            jira_issue("3", "AC-3", "2024-03-05T10:00:00.000+0000", description="Windows installer hangs"),
        ],
        extra_lines=[deep],
    )
    data = tmp_path / "data"
    done = _index(data, "--jira-dump", str(dump), "--jira-site", SITE, "--json")
    skipped = _skipped(done)
    _assert_reported(done, skipped, [f"{dump}:3 (AC-2): not read: JSON nested too deeply to parse"])
    assert skipped["count"] == 1 and skipped["examples"][0]["source"] == "jira"
    assert json.loads(done.stdout)["documents"] == 2
    assert _document_ids(data) == {f"jira:{SITE}:1", f"jira:{SITE}:3"}

    search = _run_cli(
        ["search", "windows", "--mode", "bm25", "--all-documents", "--since", "2024-03-04", "--json"],
        _clean_env(RAG_DATA_DIR=str(data)),
    )
    assert search.returncode == 0, search.stderr
    assert [r["document_id"] for r in json.loads(search.stdout)["results"]] == [f"jira:{SITE}:3"]


def test_a_memory_error_decoding_one_line_is_that_lines_problem(tmp_path: Path, monkeypatch) -> None:
    """Any exception while decoding a line, not only the ones JSON raises (reader level: a subprocess cannot
    be made to run out of memory on one line alone)."""
    import rag_pipeline.connectors.jira.dump as jira_dump

    dump = write_jira_dump(
        tmp_path / "dump.jsonl.gz",
        [jira_issue("1", "AC-1", MARCH, description="boom"), jira_issue("2", "AC-2", MARCH, description="fine")],
    )
    decode = json.loads

    def loads(text: str) -> Any:
        if "boom" in text:
            raise MemoryError("no memory left for this line")
        return decode(text)

    monkeypatch.setattr(jira_dump.json, "loads", loads)
    read = JiraDumpReader(dump, SITE).read()
    assert [d.metadata["key"] for d in read.documents] == ["AC-2"]
    assert [str(p) for p in read.problems] == [f"{dump}:1 (AC-1): not read: MemoryError: no memory left for this line"]


@pytest.mark.slow  # a real index/sync run (~25 s): the default suite keeps the Slack report test
def test_sync_reports_what_its_runs_skipped(tmp_path: Path) -> None:
    """A live sync's report comes from its raw steps' metadata (bad_records and the first ones listed) and its
    discovery: a thread whose message text is not text and a channel listed with a hostile id are named with
    their reasons, the good thread indexed, exit 0."""
    ws = SlackWorkspace(team_id=F.CRAFTED_TEAM, domain=F.CRAFTED_DOMAIN)
    ws.users = [F._user(F.ALICE, "alice", "Alice Anders")]
    ws.add_channel("C0SYNC", "general", members=[F.ALICE, F.BOT_USER], created=D1 - 86400)
    ws.post("C0SYNC", F._msg(ts(D1 + 100), F.ALICE, "wifi drops after suspend"))
    ws.post("C0SYNC", {**F._msg(ts(D1 + 200), F.ALICE, "x"), "text": {"rich": True}})
    ws.add_channel(HOSTILE_ID, "evil", members=[F.ALICE, F.BOT_USER], created=D1 - 86400)
    data = tmp_path / "data"
    with SlackEmulator(ws) as emu:
        env = _clean_env(SLACK_BOT_TOKEN="xoxb-test-token", SLACK_API_BASE_URL=emu.base_url)
        done = _run_cli(
            ["sync", "--source", "slack", "--start", "2024-03-01", "--end", "2024-03-02", "--data-dir", str(data),
             "--json"],
            env,
        )  # fmt: skip
    skipped = _skipped(done)
    expected = [
        f"slack conversations.list entry 2: Slack channel id of #evil '{HOSTILE_ID}' is not a valid id",
        f"slack #general thread {ts(D1 + 200)}: TypeError: expected string or bytes-like object",
    ]
    _assert_reported(done, skipped, expected)
    assert skipped["count"] == 2 and {e["source"] for e in skipped["examples"]} == {"slack"}
    assert Path(skipped["report"]) == data / "reports" / "skipped" / "sync.jsonl"
    assert json.loads(done.stdout)["documents"] == 1
    assert _document_ids(data) == {f"slack:{F.CRAFTED_TEAM}:C0SYNC:{ts(D1 + 100)}"}


# --- a source of which nothing could be read ------------------------------------------------------------------


def _wrap_manifest(export: Path, manifest: str) -> None:
    """The manifest's list inside an object, as another tool's export might hold it."""
    listed = json.loads((export / manifest).read_text())
    (export / manifest).write_text(json.dumps({manifest.removesuffix(".json"): listed}))


def _wrong_shape(export: Path, manifest: str) -> str:
    return (
        f'{export}/{manifest} is a JSON object, not the list of objects with an "id" a Slack export\'s '
        f"{manifest} holds; is {export} a Slack workspace export?"
    )


def test_a_slack_manifest_of_the_wrong_shape_is_an_error_naming_it(tmp_path: Path) -> None:
    export = write_slack_export(tmp_path / "export", {"2024-03-01": [msg(D1 + 100, "never indexed")]})
    _wrap_manifest(export, "channels.json")
    done = _index(tmp_path / "data", "--slack-export", str(export), "--slack-team", TEAM, "--json")
    assert done.returncode == FAILURE, done.stderr
    assert done.stdout == ""
    assert _one_error_line(done.stderr) == f"error: {_wrong_shape(export, 'channels.json')}"


@pytest.mark.parametrize("manifest", ["users.json", "groups.json"])
def test_the_other_manifests_of_the_wrong_shape_name_the_file_too(tmp_path: Path, manifest: str) -> None:
    """The same error from the reader (the command line's handling of it is the test above)."""
    export = write_slack_export(tmp_path / "export", {"2024-03-01": [msg(D1 + 100, "never indexed")]})
    _wrap_manifest(export, manifest)
    with pytest.raises(UnreadableSource) as raised:
        SlackExportReader(export, TEAM)
    assert str(raised.value) == _wrong_shape(export, manifest)
    assert explain(raised.value).code == FAILURE


def test_a_gz_dump_that_is_not_gzip_is_an_error_naming_it(tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl.gz"
    dump.write_text(json.dumps(jira_issue("1", "AC-1", MARCH)) + "\n")  # plain JSON lines under a .gz name
    done = _index(tmp_path / "data", "--jira-dump", str(dump), "--json")
    assert done.returncode == FAILURE, done.stderr
    assert _one_error_line(done.stderr) == (
        f"error: Jira dump {dump} is not gzip-compressed, as its name ending in .gz says; compress it (gzip) or "
        "rename it without .gz if it is plain JSON lines"
    )


def test_a_dump_of_which_nothing_could_be_read_is_an_error_naming_it(tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl.gz"
    dump.write_bytes(gzip.compress(b'{"key": "AC-1", "not": "an issue"}\n[1, 2]\n'))
    data = tmp_path / "data"
    done = _index(data, "--jira-dump", str(dump), "--jira-site", SITE, "--json")
    assert done.returncode == FAILURE, done.stderr
    report = data / "reports" / "skipped" / "index.jsonl"
    *named, line = done.stderr.strip().splitlines()
    assert line == (
        f"error: nothing could be read from the jira source {dump}: 2 record(s) skipped, the first: {dump}:1 "
        f"(AC-1): not a Jira issue object: KeyError: 'fields'; full list: {report}"
    )
    # Before the error line, each record named as after a run (no run was launched: no Dagster UI to look in).
    assert named[0] == "skipped 2 record(s):" and named[-1] == f"full list: {report}", done.stderr
    assert named[1].strip().startswith(f"{dump}:1 (AC-1): not a Jira issue object") and named[2].strip().startswith(
        f"{dump}:2: "
    )
    assert [json.loads(x)["location"] for x in report.read_text().splitlines()] == [f"{dump}:1 (AC-1)", f"{dump}:2"]
    _assert_quiet(done.stderr)


def test_a_dump_of_hostile_keys_only_names_each_skipped_record(tmp_path: Path) -> None:
    """Every issue with a key leading outside a folder (``../``, an absolute path, a traversing key): nothing to
    index, exit 1, and the records are named on stderr (the first 10, then how many more), not only counted."""
    keys = ["../../etc/AC-1", "/etc/passwd-2", "AC-3/../../x", *(f"../X-{n}" for n in range(9))]
    dump = write_jira_dump(tmp_path / "dump.jsonl.gz", [jira_issue(str(n), k, MARCH) for n, k in enumerate(keys, 1)])
    data = tmp_path / "data"
    done = _index(data, "--jira-dump", str(dump), "--jira-site", SITE)
    assert done.returncode == FAILURE, done.stderr
    lines = [line.strip() for line in done.stderr.strip().splitlines()]
    report = data / "reports" / "skipped" / "index.jsonl"
    assert lines[0] == f"skipped {len(keys)} record(s):", done.stderr
    for number, key in enumerate(keys[:10], 1):
        assert lines[number].startswith(f"{dump}:{number} ({key!r}): "), lines[number]
        assert f"issue key {key!r} is not a Jira issue key" in lines[number]
    assert lines[11:13] == [f"... and {len(keys) - 10} more", f"full list: {report}"]
    assert lines[13].startswith(f"error: nothing could be read from the jira source {dump}: {len(keys)} record(s)")
    assert len(lines) == 14 and len(report.read_text().splitlines()) == len(keys)
    _assert_quiet(done.stderr)


# --- date flags -----------------------------------------------------------------------------------------------


def _date_flag_error(flag: str) -> str:
    return (
        f"error: argument {flag}: must be a date (YYYY-MM-DD) or an ISO 8601 date-time (YYYY-MM-DDTHH:MM:SS, "
        "optionally with a zone), got 'notadate' (see `rag-pipeline search --help`)"
    )


def test_a_date_flag_error_names_the_flag_and_the_value(tmp_path: Path, capsys) -> None:
    done = _run_cli(["search", "wifi", "--since", "notadate"], _clean_env(RAG_DATA_DIR=str(tmp_path / "data")))
    assert done.returncode == USAGE, done.stderr
    assert _one_error_line(done.stderr) == _date_flag_error("--since")
    # --until has the same type= (in-process: the parser is all that runs).
    with pytest.raises(SystemExit) as exited:
        main(["search", "wifi", "--until", "notadate"])
    assert exited.value.code == USAGE
    assert _one_error_line(capsys.readouterr().err) == _date_flag_error("--until")


def test_date_flags_take_days_and_date_times_as_utc() -> None:
    assert iso_instant("2024-03-04") == "2024-03-04T00:00:00+00:00"
    assert iso_instant("2024-03-04T10:30") == "2024-03-04T10:30:00+00:00"
    assert iso_instant("2024-03-04T10:30:00+02:00") == "2024-03-04T08:30:00+00:00"
    assert iso_instant("2024-03-04T10:30:00Z") == "2024-03-04T10:30:00+00:00"


# --- concurrent runs on one data folder -----------------------------------------------------------------------


@pytest.mark.slow  # 10 rounds of three `index` processes: about a minute a round on 2 busy cores
def test_two_concurrent_index_runs_and_a_third_all_succeed_with_the_clean_runs_documents(tmp_path: Path) -> None:
    """Two `index` runs started together on a new data folder, then a third. Before the instance was opened
    one process at a time, the two could both create Dagster's runs.db and stamp two alembic revisions, and
    every later command on the folder failed ("more than one head present"): the third run, 3 rounds in 5."""
    dump = write_jira_dump(
        tmp_path / "dump.jsonl.gz",
        [
            jira_issue("1", "AC-1", MARCH, description="Build fails on Windows"),
            jira_issue("2", "AC-2", "2024-03-04T10:00:00.000+0000", description="Crash when opening a window"),
        ],
    )
    args = ("--jira-dump", str(dump), "--jira-site", SITE, "--json")
    clean = _index(tmp_path / "clean", *args)
    assert clean.returncode == 0, clean.stderr
    expected = (_document_ids(tmp_path / "clean"), _point_counts(tmp_path / "clean"))
    assert expected[0] == {f"jira:{SITE}:1", f"jira:{SITE}:2"}
    for round in range(10):
        data, logs = tmp_path / f"round{round}", tmp_path / f"logs{round}"
        logs.mkdir()
        processes = Processes(_clean_env(), logs)
        try:
            together = [processes.rag(name, "index", *args, "--data-dir", str(data)) for name in ("one", "two")]
            for started in together:
                assert json.loads(started.finish())["documents"] in (0, 2), f"round {round}"
        finally:
            processes.kill_all()
        third = _index(data, *args)
        assert third.returncode == 0, f"round {round}: {third.stderr}"
        assert json.loads(third.stdout)["runs"] == 0  # every range was indexed by the two before it
        assert (_document_ids(data), _point_counts(data)) == expected, f"round {round}"
