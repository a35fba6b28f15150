"""Jira CSV export reader ("Export → CSV (all fields)"): one row per issue, one document per issue.

Each row is turned into the REST issue object a JSON dump holds and goes through :func:`issue_to_document`,
so an issue becomes the same document from either format wherever the CSV carries the data. What it does not
carry, and what the reader does about it:

* Times are shown in the instance's display format (``date_format``; minutes only by default) and in the
  exporting user's zone (``timezone``): ``created``, ``updated`` and so ``version`` are only as precise.
* Comment authors are ids (account ids on Cloud, user names on Server). They are shown by display name when
  ``people`` or the export's own Assignee/Reporter/Creator (+ ``Id``) columns name that person, else by id.
* Links name the other issue by key: its id is filled in when that issue is in the export (else None), the
  relation text ("duplicates") comes from ``link_types`` (Jira's default link types are built in).
* Security levels are names; the ACL groups of the dump and the live API use level ids, so
  ``security_level_ids`` maps names to ids. An unmapped level's group is named after the level: a group no
  id-based membership grants, so such an issue is hidden rather than shown too widely.
* A file without the ``Security Level`` column (an export of the current columns, not of all fields) cannot
  say which issues are restricted: its issues are indexed readable by nobody, and the file is reported once
  (fail closed, issue 47). An empty cell under the column is an issue without a level (the project's
  browsers read it). Not a missing required column: the rest of such an export is still worth indexing, and
  the problem names the column to export.
* Comment visibility is not exported: a comment restricted to a role that the exporting user could see is
  indexed under the issue's ACL. Export as a user who sees no restricted comments.

Rows are read like dump lines: a row that cannot be read (a date in another format, an empty required cell,
a bad key) is a :class:`RecordProblem` naming the file, row and column while every other row is read. A file
without a required column is a :class:`SourceError` (a ValueError). Several files (Jira exports 1000 issues
per file) are read as one; an issue in two of them is kept once, in the copy with the later ``Updated``
(ties: the later file or row), and the duplicate is reported, as the dump reader does.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.jira.dump import JiraRead, issue_document_id, issue_to_document
from rag_pipeline.sources.document import Acl, Document
from rag_pipeline.sources.problems import RecordProblem, SourceError, describe, shown

DEFAULT_DATE_FORMAT = "%d/%b/%y %H:%M"
REQUIRED_COLUMNS = ("Issue key", "Issue id", "Summary", "Created", "Updated", "Project key")
# Without it an issue's restriction is unknown: its issues get an empty ACL (see the module's docstring).
SECURITY_COLUMN = "Security Level"
# Jira's default link types as (outward, inward) descriptions; instances rename and add their own.
JIRA_LINK_TYPES: Mapping[str, tuple[str, str]] = {
    "Blocks": ("blocks", "is blocked by"),
    "Cloners": ("clones", "is cloned by"),
    "Duplicate": ("duplicates", "is duplicated by"),
    "Relates": ("relates to", "relates to"),
}
_LINK_COLUMN = re.compile(r"(outward|inward) issue link \((.+)\)", re.IGNORECASE)
_ACCOUNT_ID = re.compile(r"\d+:[0-9a-f-]{36}|[0-9a-f]{24}")
_ISSUE_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*-\d+")
_PEOPLE = ("Assignee", "Reporter", "Creator")
# Columns turned into REST fields below; every other column (custom fields, Sprint, Attachment, Watchers...)
# is kept in ``fields`` under its header, so nothing the export holds is silently dropped from the issue.
_MAPPED = {
    name.casefold()
    for name in (
        *REQUIRED_COLUMNS,
        *_PEOPLE,
        *(f"{role} Id" for role in _PEOPLE),
        *("Issue Type", "Status", "Priority", "Resolution", "Resolved", "Due date", "Description", "Environment"),
        *("Labels", "Component/s", "Fix Version/s", "Affects Version/s", "Comment", "Security Level", "Parent id"),
        *("Parent", "Project name", "Project type", "Project id"),
    )
}


@dataclass(frozen=True)
class _Header:
    names: list[str]
    columns: dict[str, list[int]]  # casefolded name -> indexes, several for the repeated columns
    links: list[tuple[int, str, str]]  # (index, "outward"/"inward", link type name)


@dataclass(frozen=True)
class _Row:
    cells: list[str]
    header: _Header

    def all(self, name: str) -> list[str]:
        """The non-blank values of every column of that name (Comment, Labels... repeat), as written: the
        dump keeps names' and bodies' spaces too (a leading one is wiki markup: " h2. x" is no heading)."""
        values = (self.cells[i] for i in self.header.columns.get(name.casefold(), ()) if i < len(self.cells))
        return [value for value in values if value.strip()]

    def one(self, name: str) -> str:
        values = self.all(name)
        return values[0] if values else ""

    def ident(self, name: str) -> str:
        """A key, id or time: spaces around it are no part of it."""
        return self.one(name).strip()


class JiraCsvReader:
    """Reads one or more CSV files of Jira's "Export → CSV (all fields)" into documents (see the module)."""

    def __init__(
        self,
        paths: Sequence[str | Path] | str | Path,
        site: str,
        date_format: str | Sequence[str] = DEFAULT_DATE_FORMAT,
        delimiter: str = ",",
        timezone: tzinfo = UTC,
        *,
        link_types: Mapping[str, tuple[str, str]] | None = None,
        people: Mapping[str, str] | None = None,
        security_level_ids: Mapping[str, str] | None = None,
    ) -> None:
        self.paths: list[Path] = []
        for path in map(Path, [paths] if isinstance(paths, str | Path) else paths):
            if path.is_dir():
                self.paths.extend(sorted(path.glob("*.csv")))
            elif path.is_file():
                self.paths.append(path)
            else:
                raise SourceError(f"Jira CSV export not found: {path}")
        if not self.paths:
            raise SourceError(f"no Jira CSV files in {shown(paths)}")
        self.site = site
        self.date_formats = (date_format,) if isinstance(date_format, str) else tuple(date_format)
        self.delimiter = delimiter
        self.timezone = timezone
        self.link_types = {**JIRA_LINK_TYPES, **(link_types or {})}
        self.people = dict(people or {})
        self.security_level_ids = dict(security_level_ids or {})

    def _rows(self, path: Path, problems: list[RecordProblem]) -> Iterator[tuple[str, _Row]]:
        """(location, row) of every data row. The file is decoded whole (an export file is 1000 issues): a bad
        byte becomes U+FFFD and one problem; a CSV error ends the file, keeping the rows before it."""
        try:
            raw = path.read_bytes()
        except OSError as exc:
            problems.append(RecordProblem(str(path), f"not readable: {describe(exc)}"))
            return
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            problems.append(RecordProblem(str(path), f"invalid UTF-8 at byte {exc.start:,}; read with U+FFFD"))
            text = raw.decode("utf-8-sig", errors="replace")
        # Real issues hold descriptions and comments past csv's default 128 KiB per field. The limit is
        # process-wide: only ever raised, and to no more than this file, which is in memory already.
        csv.field_size_limit(max(csv.field_size_limit(), len(text)))
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=self.delimiter)
        row = line = 1
        try:
            header = _header(path, next(reader, None))
            line = reader.line_num
            if SECURITY_COLUMN.casefold() not in header.columns:
                problems.append(
                    RecordProblem(
                        str(path),
                        f"no {SECURITY_COLUMN!r} column: whether an issue is restricted is unknown, so every issue "
                        f"of this file is indexed readable by nobody; export all fields (with {SECURITY_COLUMN!r})",
                    )
                )
            for cells in reader:
                # Rows are numbered as a spreadsheet shows them (header = row 1); a quoted body spans lines.
                row, start, line = row + 1, line + 1, reader.line_num
                if not any(cell.strip() for cell in cells):
                    continue
                key = _Row(cells, header).ident("Issue key")
                location = f"{path}, row {row} (line {start})" + (f" ({shown(key, 40)})" if key else "")
                if len(cells) > len(header.names):
                    # Fewer cells are fine (tools drop trailing empty ones); more means misaligned columns.
                    problems.append(RecordProblem(location, f"{len(cells)} cells for {len(header.names)} columns"))
                    continue
                yield location, _Row(cells, header)
        except csv.Error as exc:
            problems.append(
                RecordProblem(
                    f"{path}, row {row + 1} (line {line + 1})",
                    f"the file breaks off: {describe(exc)}; the rows before it were read",
                )
            )

    def _all_rows(self, problems: list[RecordProblem]) -> Iterator[tuple[str, _Row]]:
        for path in self.paths:
            yield from self._rows(path, problems)

    def issues(
        self, projects: Iterable[str] | None = None, problems: list[RecordProblem] | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """(location, REST-shaped issue object) of every readable row of the given projects (all when None);
        rows that cannot be read are appended to ``problems``."""
        problems = [] if problems is None else problems
        wanted = set(projects) if projects is not None else None
        parsed: list[tuple[str, dict[str, Any]]] = []
        # Link targets and comment authors are resolved against the whole export, every project included.
        key_ids: dict[str, str] = {}
        people: dict[str, str] = {}
        for location, row in self._all_rows(problems):
            if row.ident("Issue key") and row.ident("Issue id"):
                key_ids[row.ident("Issue key")] = row.ident("Issue id")
            for role in _PEOPLE:
                if row.one(role) and row.ident(f"{role} Id"):
                    people.setdefault(row.ident(f"{role} Id"), row.one(role))
            if wanted is not None and row.ident("Project key") not in wanted:
                continue
            try:
                parsed.append((location, self._issue(row)))
            except ValueError as exc:
                problems.append(RecordProblem(location, describe(exc)))
        people.update(self.people)
        for _, issue in parsed:
            _resolve(issue["fields"], key_ids, people)
        return parsed

    def read(self, projects: Iterable[str] | None = None) -> JiraRead:
        """Every issue of the given projects (all when None); bad rows are reported, not fatal. An issue id
        seen twice is kept once, in its newest version (ties: the later file or row), and reported."""
        out = JiraRead()
        for location, issue in self.issues(projects, out.problems):
            try:
                doc = _unknown_link_ids(issue_to_document(issue, self.site))
            except Exception as exc:  # one issue's data never ends the read
                out.problems.append(RecordProblem(location, describe(exc)))
                continue
            if "security" not in issue["fields"]:
                doc = doc.model_copy(update={"acl": Acl()})  # no Security Level column: readable by nobody
            out.keep_newest(location, doc, "in this row", "other row's")
        return out.finish()

    def key_to_document_id(self) -> dict[str, str]:
        """Issue key -> document id, for turning key-based eval sets into document ids."""
        return {
            row.ident("Issue key"): issue_document_id(self.site, row.ident("Issue id"))
            for _, row in self._all_rows([])
            if row.ident("Issue key") and row.ident("Issue id")
        }

    def _time(self, value: str, column: str, *, day: bool = False) -> str | None:
        """A shown time as a REST timestamp (``2021-09-30T17:20:00.000+0000``); None for an empty cell."""
        value = value.strip()
        if not value:
            return None
        # A date-only column (Due date) may be shown with the date part of the format alone.
        formats = self.date_formats + (tuple(f.split(" ")[0] for f in self.date_formats) if day else ())
        for fmt in formats:
            try:
                parsed = datetime.strptime(value, fmt)
            except ValueError:
                continue
            parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=self.timezone)
            return f"{parsed:%Y-%m-%dT%H:%M:%S}.{parsed.microsecond // 1000:03d}{parsed:%z}"
        raise ValueError(f"column {column!r}: {shown(value)} matches none of the date formats {formats}")

    def _issue(self, row: _Row) -> dict[str, Any]:
        """The REST issue object of a row; people and link targets are resolved later, against every row."""
        for column in REQUIRED_COLUMNS:
            if not row.one(column):
                raise ValueError(f"column {column!r} is empty")
        header = row.header
        fields: dict[str, Any] = {}
        for index, name in enumerate(header.names):
            folded = name.casefold()
            if folded in _MAPPED or header.columns[folded][0] != index or _LINK_COLUMN.fullmatch(name):
                continue
            values = row.all(name)
            if values:
                fields[name] = values if len(header.columns[folded]) > 1 else values[0]
        level = row.one("Security Level")
        due = self._time(row.one("Due date"), "Due date", day=True)
        parent = row.ident("Parent id") or row.ident("Parent")
        fields.update(
            summary=row.one("Summary"),
            description=row.one("Description") or None,
            environment=row.one("Environment") or None,
            created=self._time(row.one("Created"), "Created"),
            updated=self._time(row.one("Updated"), "Updated"),
            resolutiondate=self._time(row.one("Resolved"), "Resolved"),
            duedate=due[:10] if due else None,
            project={
                "key": row.ident("Project key"),
                "name": row.one("Project name") or None,
                "id": row.ident("Project id") or None,
                "projectTypeKey": row.one("Project type") or None,
            },
            issuetype=_named(row.one("Issue Type")),
            status=_named(row.one("Status")),
            priority=_named(row.one("Priority")),
            resolution=_named(row.one("Resolution")),
            labels=row.all("Labels"),
            components=[{"name": name} for name in row.all("Component/s")],
            fixVersions=[{"name": name} for name in row.all("Fix Version/s")],
            versions=[{"name": name} for name in row.all("Affects Version/s")],
            issuelinks=self._links(row),
            comment={"comments": [self._comment(cell) for cell in row.all("Comment")]},
            watches={"watchCount": len(row.all("Watchers"))},
            parent=({"key": parent} if _ISSUE_KEY.fullmatch(parent) else {"id": parent}) if parent else None,
            **{role.lower(): _person(row.one(role), row.ident(f"{role} Id")) for role in _PEOPLE},
        )
        if SECURITY_COLUMN.casefold() in header.columns:
            # Left out of the fields when the column is missing: read() then gives the issue an empty ACL.
            fields["security"] = {"name": level, "id": self.security_level_ids.get(level)} if level else None
        fields["comment"]["total"] = len(fields["comment"]["comments"])
        return {"id": row.ident("Issue id"), "key": row.ident("Issue key"), "fields": fields}

    def _links(self, row: _Row) -> list[dict[str, Any]]:
        links = []
        for index, direction, kind in row.header.links:
            outward, inward = self.link_types.get(kind, (None, None))
            # One key per column in Jira's export; a comma-separated cell (spreadsheet edits) is split too.
            for key in (row.cells[index] if index < len(row.cells) else "").replace(",", " ").split():
                links.append(
                    {"type": {"name": kind, "outward": outward, "inward": inward}, f"{direction}Issue": {"key": key}}
                )
        return links

    def _comment(self, cell: str) -> dict[str, Any]:
        # "date;author;body": the body is everything after the second semicolon, its own semicolons included.
        parts = cell.split(";", 2)
        if len(parts) < 3:
            raise ValueError(f"column 'Comment': {shown(cell)} is not 'date;author;body'")
        when, author, body = parts
        return {"created": self._time(when, "Comment"), "author": _person("", author.strip()), "body": body}


def _header(path: Path, names: list[str] | None) -> _Header:
    if not names:
        raise SourceError(f"{path}: empty, no header row of a Jira CSV export")
    names = [name.strip() for name in names]
    columns: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        columns.setdefault(name.casefold(), []).append(index)
    missing = [name for name in REQUIRED_COLUMNS if name.casefold() not in columns]
    if missing:
        raise SourceError(
            f"{path}: not a Jira CSV export of all fields, missing the column(s) {', '.join(map(repr, missing))}"
        )
    links = [
        (index, match.group(1).lower(), match.group(2).strip())
        for index, name in enumerate(names)
        if (match := _LINK_COLUMN.fullmatch(name))
    ]
    return _Header(names, columns, links)


def _named(value: str) -> dict[str, str] | None:
    return {"name": value} if value else None


def _person(display: str, ident: str) -> dict[str, str] | None:
    if not display and not ident:
        return None
    person = {("accountId" if _ACCOUNT_ID.fullmatch(ident) else "name"): ident} if ident else {}
    if display:
        person["displayName"] = display
    return person


def _resolve(fields: dict[str, Any], key_ids: Mapping[str, str], people: Mapping[str, str]) -> None:
    """Fill in what only the whole export knows: link targets' ids and the display names behind ids."""
    for link in fields["issuelinks"]:
        other = link.get("outwardIssue") or link["inwardIssue"]
        other["id"] = key_ids.get(other["key"])
    for person in [*(fields[role.lower()] for role in _PEOPLE), *(c["author"] for c in fields["comment"]["comments"])]:
        if person and "displayName" not in person:
            name = people.get(person.get("accountId") or person.get("name") or "")
            if name:
                person["displayName"] = name


def _unknown_link_ids(doc: Document) -> Document:
    # issue_to_document writes a link's id with str(): a target outside the export would read "None".
    links = doc.metadata.get("links") or []
    if all(link["id"] != "None" for link in links):
        return doc
    fixed = [{**link, "id": None} if link["id"] == "None" else link for link in links]
    return doc.model_copy(update={"metadata": {**doc.metadata, "links": fixed}})
