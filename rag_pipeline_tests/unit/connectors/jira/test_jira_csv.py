"""Jira CSV export reader: documents equal to the JSON-dump reader's for the same issues, Jira's repeated and
link columns, and the export's edge cases (quoted multi-line cells, BOM, delimiter, dates, several files)."""

from __future__ import annotations

import codecs
import csv
import gzip
import json
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from rag_pipeline.connectors.jira.csv_export import JiraCsvReader
from rag_pipeline.connectors.jira.dump import JiraDumpReader
from rag_pipeline.connectors.jira.settings import BUNDLED_JIRA_DUMP, BUNDLED_JIRA_SITE
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import SourceError
from rag_pipeline_tests.kit.paths import FIXTURES_DIR

FIXTURES = FIXTURES_DIR / "jira_csv"
# The appcelerator instance shows seconds ("31/Jan/15 15:02:23"): with Jira's default minutes-only format
# the CSV could not carry the dump's created/updated/version to the second.
SECONDS = "%d/%b/%y %H:%M:%S"
ALICE = "557058:1c1f5c9e-4b7e-4d2a-9f3a-1a2b3c4d5e6f"
CAROL = "712020:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
SITE = "demo.atlassian.net"


@pytest.fixture(scope="module")
def dump_issues() -> list[dict[str, Any]]:
    with gzip.open(BUNDLED_JIRA_DUMP, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def dump_docs() -> dict[str, Document]:
    read = JiraDumpReader(BUNDLED_JIRA_DUMP, BUNDLED_JIRA_SITE).read(projects=["AC"])
    assert read.problems == []
    return {doc.metadata["key"]: doc for doc in read.documents}


def _link_types(issues: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """The instance's link types as an admin would copy them from Issue linking (appcelerator renamed some)."""
    return {
        link["type"]["name"]: (link["type"]["outward"], link["type"]["inward"])
        for issue in issues
        for link in issue["fields"]["issuelinks"]
    }


def _assert_same(csv_doc: Document, dump_doc: Document, exported_keys: set[str]) -> None:
    """Field by field, so a failure names the field."""
    for name in Document.model_fields:
        if name != "metadata":
            assert getattr(csv_doc, name) == getattr(dump_doc, name), (dump_doc.metadata["key"], name)
    expected = dict(dump_doc.metadata)
    # A link column holds the other issue's key only: its id is known when that issue is in the export.
    # Links come in column order, not the issue's link order: compared as sets.
    expected["links"] = [
        {**link, "id": link["id"] if link["key"] in exported_keys else None} for link in expected["links"]
    ]
    got = dict(csv_doc.metadata)
    for metadata in (expected, got):
        metadata["links"] = sorted(metadata["links"], key=lambda link: json.dumps(link, sort_keys=True))
    assert got == expected, dump_doc.metadata["key"]


def _show(value: str, fmt: str) -> str:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%f%z").astimezone(UTC).strftime(fmt)


def write_export(path: Path, issues: list[dict[str, Any]], fmt: str = SECONDS, **fmtparams: Any) -> Path:
    """The issues in Jira's "CSV (all fields)" layout: one column per value of a repeated field (as many as
    the issue with the most needs), link columns per type and direction, comments as date;author;body."""
    people = ("Assignee", "Reporter", "Creator")

    def person(fields: dict[str, Any], role: str) -> list[str]:
        someone = fields.get(role.lower()) or {}
        return [someone.get("displayName", ""), someone.get("name", "")]

    def links(fields: dict[str, Any]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for link in fields["issuelinks"]:
            direction = "Outward" if "outwardIssue" in link else "Inward"
            other = link.get("outwardIssue") or link["inwardIssue"]
            out.setdefault(f"{direction} issue link ({link['type']['name']})", []).append(other["key"])
        return out

    def repeated(fields: dict[str, Any]) -> dict[str, list[str]]:
        comments = [
            f"{_show(c['created'], fmt)};{(c.get('author') or {}).get('name', '')};{c.get('body') or ''}"
            for c in fields["comment"]["comments"]
        ]
        return {
            "Labels": fields["labels"],
            "Component/s": [c["name"] for c in fields["components"]],
            "Fix Version/s": [v["name"] for v in fields.get("fixVersions") or []],
            **links(fields),
            "Comment": comments,
        }

    widths: Counter[str] = Counter()
    for issue in issues:
        for column, values in repeated(issue["fields"]).items():
            widths[column] = max(widths[column], len(values))
    header = ["Summary", "Issue key", "Issue id", "Issue Type", "Status", "Project key", "Project name"]
    header += ["Priority", "Resolution", *(f"{role}{suffix}" for role in people for suffix in ("", " Id"))]
    header += ["Created", "Updated", "Resolved", "Description", "Environment"]
    header += [column for column, width in widths.items() for _ in range(width)]
    # Jira's all-fields export has the column, empty for issues without a level; rows leave it out as a trailing
    # empty cell. Without it every issue would be readable by nobody (fail closed, issue 47).
    header += ["Security Level"]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, **fmtparams)
        writer.writerow(header)
        for issue in issues:
            f = issue["fields"]
            row = [f["summary"], issue["key"], issue["id"], f["issuetype"]["name"], f["status"]["name"]]
            row += [f["project"]["key"], f["project"]["name"], (f.get("priority") or {}).get("name", "")]
            row += [(f.get("resolution") or {}).get("name", ""), *(v for role in people for v in person(f, role))]
            row += [_show(f["created"], fmt), _show(f["updated"], fmt)]
            row += [_show(f["resolutiondate"], fmt) if f.get("resolutiondate") else ""]
            row += [f.get("description") or "", f.get("environment") or ""]
            values = repeated(f)
            row += [v for column, width in widths.items() for v in (values.get(column, []) + [""] * width)[:width]]
            writer.writerow(row)
    return path


def test_hand_written_export_equals_the_dump(dump_issues: list[dict[str, Any]], dump_docs: dict[str, Document]) -> None:
    reader = JiraCsvReader(
        FIXTURES / "appcelerator_ac.csv", BUNDLED_JIRA_SITE, SECONDS, link_types=_link_types(dump_issues)
    )
    read = reader.read()
    assert read.problems == []
    docs = {doc.metadata["key"]: doc for doc in read.documents}
    assert list(docs) == ["AC-23", "AC-30", "AC-1337"]
    for key, doc in docs.items():
        _assert_same(doc, dump_docs[key], set(docs))
    # Not vacuous: these issues carry comments, several labels, components and links in both directions.
    assert docs["AC-30"].metadata["comment_count"] == 2 and docs["AC-1337"].metadata["labels"] == [
        "android",
        "defect",
        "studio3",
    ]
    assert {(link["relation"], link["key"], link["id"]) for link in docs["AC-1337"].metadata["links"]} == {
        ("is cloned into", "TISTUD-6274", None),
        ("duplicates", "AC-1294", None),
    }
    assert docs["AC-23"].metadata["links"][0] == {
        "type": "Duplicate",
        "direction": "inward",
        "relation": "is duplicated by",
        "key": "AC-30",
        "id": "144104",
    }
    assert reader.key_to_document_id()["AC-30"] == f"jira:{BUNDLED_JIRA_SITE}:144104"


def test_generated_export_of_a_project_in_three_files_equals_the_dump(
    tmp_path: Path, dump_issues: list[dict[str, Any]], dump_docs: dict[str, Document]
) -> None:
    issues = [issue for issue in dump_issues if issue["fields"]["project"]["key"] == "AC"]
    files = [write_export(tmp_path / f"jira{n}.csv", issues[n * 200 : n * 200 + 200]) for n in range(3)]
    # Comment cells name authors by user name; a third of them never report, create or own an issue, so their
    # display names come from the user directory, stood in for by the dump's own names.
    people = {
        c["author"]["name"]: c["author"]["displayName"]
        for issue in issues
        for c in issue["fields"]["comment"]["comments"]
        if c.get("author")
    }
    reader = JiraCsvReader(files, BUNDLED_JIRA_SITE, SECONDS, link_types=_link_types(dump_issues), people=people)
    read = reader.read()
    assert read.problems == []
    assert len(read.documents) == len(dump_docs) == len(issues) == 524
    keys = {issue["key"] for issue in issues}
    for doc in read.documents:
        _assert_same(doc, dump_docs[doc.metadata["key"]], keys)
    # The export spans repeated columns of every kind: the comparison above exercised them.
    header = next(csv.reader(files[0].open(encoding="utf-8")))
    assert header.count("Comment") > 10 and header.count("Labels") > 2 and header.count("Component/s") > 1
    assert any(doc.metadata["links"] and doc.metadata["links"][0]["id"] is None for doc in read.documents)


def _cloud(**options: Any) -> JiraCsvReader:
    return JiraCsvReader(FIXTURES / "cloud_export.csv", SITE, security_level_ids={"Staff only": "10200"}, **options)


def test_repeated_columns_links_and_people_of_a_cloud_export() -> None:
    reader = _cloud()
    read = reader.read()
    assert read.problems == []
    docs = {doc.metadata["key"]: doc for doc in read.documents}
    one = docs["DEMO-1"]
    assert one.metadata["labels"] == ["login", "regression"]
    assert one.metadata["components"] == ["Backend", "Auth"]
    assert one.metadata["comment_count"] == 3
    # Comment authors are account ids: Bob is named by his Assignee Id on another row, Carol by no column.
    assert one.authors == ("Alice Admin", "Bob Builder", CAROL)
    assert one.text.split("Comments:\n")[1].split("\n\n") == [
        "Bob Builder (2021-10-01): Reproduced; the refresh call returns 401.\nLooking at it.",
        f"{CAROL} (2021-10-01): Same here; a; b; c",
        "Alice Admin (2021-10-02): Thanks, see DEMO-2.",
    ]
    # The quoted multi-line description keeps its lines, quotes and semicolons.
    assert one.text.split("\n\n")[1:3] == [
        'Steps:\n1. open "/login"; enter a password\n2. wait 30 min',
        "Expected: still logged in.",
    ]
    assert one.created == datetime(2021, 9, 30, 17, 20, tzinfo=UTC)
    assert one.version == datetime(2021, 10, 2, 9, 5, tzinfo=UTC).timestamp()
    assert sorted(
        (link["direction"], link["type"], link["relation"], link["key"], link["id"]) for link in one.metadata["links"]
    ) == [
        ("inward", "Blocks", "is blocked by", "DEMO-2", "10002"),
        ("outward", "Relates", "relates to", "DEMO-3", "10003"),
        ("outward", "Relates", "relates to", "OTHER-7", None),
    ]
    assert docs["DEMO-3"].metadata["links"] == [
        {"type": "Duplicate", "direction": "outward", "relation": "duplicates", "key": "DEMO-1", "id": "10001"}
    ]
    assert one.acl.groups == (f"jira:{SITE}:project:DEMO",)
    assert docs["DEMO-3"].acl.groups == (f"jira:{SITE}:security:10200",)
    assert docs["DEMO-3"].metadata["security_level"] == "Staff only"
    # Columns without a document field still reach the REST-shaped issue: every value of the repeated ones.
    fields = {issue["key"]: issue["fields"] for _, issue in reader.issues()}["DEMO-1"]
    assert [v["name"] for v in fields["fixVersions"]] == ["1.1", "1.2"]
    assert fields["Sprint"] == ["DEMO Sprint 1", "DEMO Sprint 2"]
    assert fields["Watchers Id"] == [ALICE, "5b10a2844c20165700ede21f"]
    assert fields["Attachment"] == [
        f"30/Sep/21 17:21;{ALICE};trace.log;https://demo.atlassian.net/secure/attachment/10100/trace.log"
    ]
    assert fields["Custom field (Story point estimate)"] == "3"
    assert fields["duedate"] == "2021-10-15" and fields["priority"] == {"name": "High"}
    assert fields["reporter"] == {"accountId": ALICE, "displayName": "Alice Admin"}
    assert {i["key"]: i["fields"]["parent"] for _, i in reader.issues()}["DEMO-2"] == {"id": "10001"}


def test_bom_timezone_projects_and_twelve_hour_clock(tmp_path: Path) -> None:
    assert (FIXTURES / "cloud_export.csv").read_bytes().startswith(codecs.BOM_UTF8)
    berlin = _cloud(timezone=timezone(timedelta(hours=2))).read().documents[0]
    assert berlin.created == datetime(2021, 9, 30, 15, 20, tzinfo=UTC)
    assert _cloud().read(projects=["OTHER"]).documents == []
    twelve = tmp_path / "twelve.csv"
    twelve.write_text(
        (FIXTURES / "cloud_export.csv").read_text(encoding="utf-8-sig").replace("30/Sep/21 17:20", "30/Sep/21 5:20 PM"),
        encoding="utf-8",
    )
    read = JiraCsvReader(twelve, SITE, ["%d/%b/%y %H:%M", "%d/%b/%y %I:%M %p"]).read()
    assert read.problems == [] and read.documents[0].created == datetime(2021, 9, 30, 17, 20, tzinfo=UTC)


def test_semicolon_delimiter(tmp_path: Path) -> None:
    rows = list(csv.reader((FIXTURES / "cloud_export.csv").open(encoding="utf-8-sig", newline="")))
    semicolons = tmp_path / "semicolons.csv"
    with semicolons.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle, delimiter=";").writerows(rows)
    expected = _cloud().read().documents
    read = JiraCsvReader(semicolons, SITE, delimiter=";", security_level_ids={"Staff only": "10200"}).read()
    assert read.problems == [] and read.documents == expected
    # Read with the wrong delimiter the header is one column: no required column is found.
    with pytest.raises(SourceError, match="'Issue key'"):
        JiraCsvReader(semicolons, SITE).read()


def test_unknown_date_format_is_a_problem_naming_row_and_column(tmp_path: Path) -> None:
    text = (FIXTURES / "cloud_export.csv").read_text(encoding="utf-8-sig")
    bad = tmp_path / "bad.csv"
    bad.write_text(
        text.replace("01/Oct/21 10:00", "2021-10-01 10:00").replace(
            "02/Oct/21 12:00,02/Oct/21 12:00", "02/Oct/21 12:00,Tuesday"
        ),
        encoding="utf-8",
    )
    read = JiraCsvReader(bad, SITE).read()
    assert [doc.metadata["key"] for doc in read.documents] == ["DEMO-1"]
    assert len(read.problems) == 2
    # DEMO-1's quoted cells take lines 2-7: DEMO-2, the third row, starts on line 8.
    assert read.problems[0].location == f"{bad}, row 3 (line 8) ('DEMO-2')"
    assert "column 'Created'" in read.problems[0].reason and "'2021-10-01 10:00'" in read.problems[0].reason
    assert read.problems[1].location.startswith(f"{bad}, row 4 (line 9)")
    assert "column 'Updated'" in read.problems[1].reason
    # A comment's date is checked as well.
    bad.write_text(text.replace("01/Oct/21 09:30;", "yesterday;"), encoding="utf-8")
    (problem,) = JiraCsvReader(bad, SITE).read().problems
    assert "row 2" in problem.location and "column 'Comment'" in problem.reason


def test_missing_required_column_names_file_and_column(tmp_path: Path) -> None:
    text = (FIXTURES / "cloud_export.csv").read_text(encoding="utf-8-sig")
    broken = tmp_path / "broken.csv"
    broken.write_text(text.replace(",Updated,", ",Last updated,", 1), encoding="utf-8")
    with pytest.raises(SourceError, match="'Updated'") as error:
        JiraCsvReader(broken, SITE).read()
    assert str(broken) in str(error.value)
    with pytest.raises(SourceError, match="not found"):
        JiraCsvReader(tmp_path / "absent.csv", SITE)


def test_second_file_with_a_newer_version_wins(tmp_path: Path) -> None:
    old = FIXTURES / "cloud_export.csv"
    newer = tmp_path / "newer.csv"
    text = old.read_text(encoding="utf-8-sig")
    header = text.split("\n", 1)[0]
    row = text[text.index("Refresh the token") : text.index("Rotate the signing keys")]
    newer.write_text(
        header
        + "\n"
        + row.replace("Refresh the token", "Refresh the token early").replace(
            "02/Oct/21 11:00,,", "05/Oct/21 08:00,,", 1
        ),
        encoding="utf-8",
    )
    for order in ([old, newer], [newer, old]):
        read = JiraCsvReader(order, SITE).read()
        docs = {doc.metadata["key"]: doc for doc in read.documents}
        assert len(docs) == 3 and docs["DEMO-2"].title == "DEMO-2: Refresh the token early before expiry"
        assert docs["DEMO-2"].updated == datetime(2021, 10, 5, 8, 0, tzinfo=UTC)
        (problem,) = read.problems
        assert "issue id 10002 also at" in problem.reason


def test_damaged_rows_cost_only_themselves(tmp_path: Path) -> None:
    text = (FIXTURES / "cloud_export.csv").read_text(encoding="utf-8-sig")
    damaged = tmp_path / "damaged.csv"
    damaged.write_bytes(
        text.replace("Rotate the signing keys", "")  # DEMO-3 without its summary
        .replace("Refresh at 80%", "Refresh at \udcff80%")  # an invalid UTF-8 byte in DEMO-2
        .replace(",,\n", ",,,extra\n", 1)  # DEMO-2 with one cell too many
        .encode("utf-8", errors="surrogateescape")
    )
    bad_byte = damaged.read_bytes().index(b"\xff")
    read = JiraCsvReader(damaged, SITE).read()
    assert [doc.metadata["key"] for doc in read.documents] == ["DEMO-1"]
    assert [(problem.location.replace(str(damaged), "F"), problem.reason) for problem in read.problems] == [
        ("F", f"invalid UTF-8 at byte {bad_byte:,}; read with U+FFFD"),
        ("F, row 3 (line 8) ('DEMO-2')", "52 cells for 51 columns"),
        ("F, row 4 (line 9) ('DEMO-3')", "ValueError: column 'Summary' is empty"),
    ]
