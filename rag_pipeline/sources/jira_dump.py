"""Jira dump reader: one JSON issue per line (REST ``/issue`` objects), one document per issue."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rag_pipeline.sources.document import Acl, Document, content_hash
from rag_pipeline.sources.problems import RecordProblem, SourceError
from rag_pipeline.text.clean import clean_text, looks_like_html, strip_html
from rag_pipeline.text.jira_markup import jira_body_to_text

SOURCE = "jira"


def project_group(site: str, project_key: str) -> str:
    """ACL group of everyone with browse permission on a project."""
    return f"jira:{site}:project:{project_key}"


def security_level_group(site: str, level_id: str) -> str:
    """ACL group of an issue security level."""
    return f"jira:{site}:security:{level_id}"


def issue_document_id(site: str, issue_id: str) -> str:
    return f"jira:{site}:{issue_id}"


def parse_jira_time(value: str) -> datetime:
    """Jira timestamps: ``2015-04-18T15:54:04.000+0000`` (also ``Z`` and ``+00:00`` forms)."""
    value = value.strip()
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without timezone: {value!r}")
    return parsed


@dataclass
class JiraRead:
    """Documents read from a dump plus the records that could not be read."""

    documents: list[Document] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)


_FENCED = re.compile(r"(```.*?```)", re.S)


def body_text(body: Any) -> str:
    """A description or comment body as clean text (ADF, wiki markup, or HTML from some exports).

    HTML is stripped only outside code blocks: markup inside code is content (test pages, XML views).
    """
    parts = _FENCED.split(jira_body_to_text(body))
    return clean_text(
        "".join(strip_html(part) if i % 2 == 0 and looks_like_html(part) else part for i, part in enumerate(parts))
    )


def issue_to_document(issue: dict[str, Any], site: str) -> Document:
    """One Jira REST issue object (v2 wiki or v3 ADF bodies) as a Document."""
    fields = issue["fields"]
    key = issue["key"]
    project = fields["project"]["key"]
    summary = (fields.get("summary") or "").strip()
    parts = [f"{key}: {summary}"]
    description = body_text(fields.get("description"))
    if description:
        parts.append(description)
    authors: list[str] = []
    reporter = _person(fields.get("reporter")) or _person(fields.get("creator"))
    if reporter:
        authors.append(reporter)
    comments = (fields.get("comment") or {}).get("comments") or []
    comment_lines = []
    restricted = 0
    for comment in comments:
        if comment.get("visibility"):
            # Visible to one role or group only: indexed under the issue's wider ACL it would leak.
            restricted += 1
            continue
        body = body_text(comment.get("body"))
        if not body:
            continue
        author = _person(comment.get("author")) or "unknown"
        when = (comment.get("created") or "")[:10]
        comment_lines.append(f"{author} ({when}): {body}")
        if author not in authors:
            authors.append(author)
    if comment_lines:
        parts.append("Comments:\n" + "\n\n".join(comment_lines))
    text = "\n\n".join(parts)
    updated = parse_jira_time(fields["updated"])
    created = parse_jira_time(fields.get("created") or fields["updated"])
    security = fields.get("security")
    acl = (
        Acl(groups=(security_level_group(site, str(security.get("id") or security.get("name"))),))
        if security
        else Acl(groups=(project_group(site, project),))
    )
    return Document(
        id=issue_document_id(site, str(issue["id"])),
        source=SOURCE,
        container=project,
        title=f"{key}: {summary}",
        text=text,
        url=f"https://{site}/browse/{key}",
        authors=tuple(authors),
        created=created,
        updated=updated,
        version=updated.timestamp(),
        content_hash=content_hash(text),
        acl=acl,
        metadata={
            "key": key,
            "project_name": fields["project"].get("name"),
            "issue_type": (fields.get("issuetype") or {}).get("name"),
            "status": (fields.get("status") or {}).get("name"),
            "resolution": (fields.get("resolution") or {}).get("name"),
            "labels": list(fields.get("labels") or []),
            "components": [c.get("name") for c in fields.get("components") or []],
            "links": _links(fields.get("issuelinks") or []),
            "comment_count": len(comment_lines),
            "restricted_comments": restricted,
            "security_level": (security or {}).get("name"),
        },
    )


def _links(raw_links: list[dict[str, Any]]) -> list[dict[str, str]]:
    links = []
    for link in raw_links:
        kind = link.get("type") or {}
        if "outwardIssue" in link:
            other, direction, relation = link["outwardIssue"], "outward", kind.get("outward")
        elif "inwardIssue" in link:
            other, direction, relation = link["inwardIssue"], "inward", kind.get("inward")
        else:
            continue
        links.append(
            {
                "type": kind.get("name"),
                "direction": direction,
                "relation": relation,
                "key": other.get("key"),
                "id": str(other.get("id")),
            }
        )
    return links


def _person(person: dict[str, Any] | None) -> str | None:
    if not person:
        return None
    return person.get("displayName") or person.get("name") or person.get("accountId")


class JiraDumpReader:
    """Reads a JSON-lines dump (optionally gzipped) of Jira REST issue objects."""

    def __init__(self, path: str | Path, site: str) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"Jira dump not found: {self.path}")
        self.site = site

    def _lines(self) -> Iterator[tuple[int, str]]:
        opener = gzip.open if self.path.suffix == ".gz" else open
        with opener(self.path, "rt", encoding="utf-8") as handle:
            yield from enumerate(handle, start=1)

    def read(self, projects: Iterable[str] | None = None) -> JiraRead:
        """Every issue of the given projects (all when None); bad lines are reported, not fatal."""
        wanted = set(projects) if projects is not None else None
        out = JiraRead()
        for number, line in self._lines():
            if not line.strip():
                continue
            location = f"{self.path}:{number}"
            try:
                issue = json.loads(line)
                project = issue["fields"]["project"]["key"]
            except (ValueError, KeyError, TypeError) as exc:
                out.problems.append(RecordProblem(location, f"not a Jira issue object: {type(exc).__name__}: {exc}"))
                continue
            if wanted is not None and project not in wanted:
                continue
            try:
                out.documents.append(issue_to_document(issue, self.site))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                key = issue.get("key", "?")
                out.problems.append(RecordProblem(f"{location} ({key})", f"{type(exc).__name__}: {exc}"))
        return out

    def key_to_document_id(self) -> dict[str, str]:
        """Issue key -> document id, for turning key-based eval sets into document ids."""
        mapping = {}
        for _, line in self._lines():
            if line.strip():
                issue = json.loads(line)
                mapping[issue["key"]] = issue_document_id(self.site, str(issue["id"]))
        return mapping
