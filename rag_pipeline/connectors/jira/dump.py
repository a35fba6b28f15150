"""Jira dump reader: one JSON issue per line (REST ``/issue`` objects), one document per issue.

A dump is input from outside: each line is read on its own, so a line that is not JSON, not UTF-8, too deeply
nested or not a valid issue is a :class:`RecordProblem` naming the file and line (and the issue key when it
can be found) while every other line is still read; any exception while decoding a line (RecursionError and
MemoryError included) is that line's problem. A damaged compressed stream keeps the lines before the damage
and reports where it broke; a file that cannot be read up to its first line (a ``.gz`` that is not gzip) is
:class:`UnreadableSource`, naming the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.atlassian.dump_lines import json_object, located_lines
from rag_pipeline.connectors.atlassian.groups import site_group_builder
from rag_pipeline.connectors.jira.markup import jira_body_to_text
from rag_pipeline.sources.document import BELONGS_TO, FAMILY, Acl, Document, content_hash, utc_instant
from rag_pipeline.sources.identifiers import check_container_id
from rag_pipeline.sources.json_lines import numbered_lines
from rag_pipeline.sources.problems import (
    RecordError,
    RecordProblem,
    SourceError,
    describe,
    shown,
)
from rag_pipeline.text.clean import clean_text, clean_title, drop_invisible, looks_like_html, strip_html

SOURCE = "jira"


# ACL group of everyone with browse permission on a project (its key the name).
project_group = site_group_builder(SOURCE, "project")
# ACL group of a concrete Jira group.
jira_group = site_group_builder(SOURCE, "group")
# ACL group of an issue security level (its id the name).
security_level_group = site_group_builder(SOURCE, "security")


def issue_document_id(site: str, issue_id: str) -> str:
    return f"jira:{site}:{issue_id}"


def role_group(site: str, project_key: str, role: str) -> str:
    """ACL group of the members of one project role (a restricted comment's ``visibility``)."""
    return f"jira:{site}:role:{project_key}:{role}"


# Not "#": a document id travels in URL paths (/v1/documents/…), where "#" would end the path.
_COMMENT_MARK = ":comment-"


def role_actors(role: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """A project role's actors (``project/<KEY>/role/<id>``, Cloud and Server shapes): its group names and its
    users' account ids (names on Server); an actor naming neither is left out."""
    groups: list[str] = []
    users: list[str] = []
    for actor in role.get("actors") or ():
        if not isinstance(actor, Mapping):
            continue
        if actor.get("actorGroup") or actor.get("type") == "atlassian-group-role-actor":
            name = str((actor.get("actorGroup") or {}).get("name") or actor.get("name") or "")
            if name:
                groups.append(name)
        elif actor.get("actorUser") or actor.get("type") == "atlassian-user-role-actor":
            account_id = str((actor.get("actorUser") or {}).get("accountId") or actor.get("name") or "")
            if account_id:
                users.append(account_id)
    return groups, users


def comment_document_id(issue_document: str, comment_id: str) -> str:
    """A restricted comment's own document: it is read under its own ACL, so it cannot share the issue's."""
    return f"{issue_document}{_COMMENT_MARK}{comment_id}"


def issue_of(document_id: str) -> str:
    """The issue document a Jira document belongs to: itself, or a restricted comment's issue."""
    return document_id.split(_COMMENT_MARK, 1)[0]


# Comment ids are numbers in Jira; they end up in document ids.
_COMMENT_ID = re.compile(r"[0-9]{1,20}")


# Issue keys are a project key, a dash and a number (TIMOB-1234); they end up in titles and browse URLs.
_ISSUE_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}-\d{1,12}")
# Issue ids are numbers in Jira; they end up in document ids.
_ISSUE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# The first two bytes of every gzip stream (RFC 1952).
# The issue key of a line that is not valid JSON, to name it in the problem (the first "key" of a REST issue
# object is its own; project keys have no "-<number>").
_KEY_HINT = re.compile(rb'"key"\s*:\s*"([A-Za-z][A-Za-z0-9_]{0,63}-\d{1,12})"')


def parse_jira_time(value: str) -> datetime:
    """Jira timestamps: ``2015-04-18T15:54:04.000+0000`` (also ``Z`` and ``+00:00`` forms). ValueError for
    anything else, a time without a zone, or one outside what UTC can show."""
    if not isinstance(value, str):
        raise ValueError(f"timestamp {shown(value)} is not a string")
    value = value.strip()
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            parsed = datetime.strptime(value, fmt)
        except ValueError:
            continue
        utc_instant(parsed)
        return parsed
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without timezone: {value!r}")
    utc_instant(parsed)
    return parsed


@dataclass
class JiraRead:
    """Documents read from a dump plus the records that could not be read."""

    documents: list[Document] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)
    _kept: dict[str, tuple[str, Document]] = field(default_factory=dict, repr=False)

    def keep_newest(self, location: str, doc: Document, here: str, there: str) -> None:
        """Keep ``doc`` unless an issue with its id and a newer version was read before (ties: this one), and
        report the duplicate; ``here``/``there`` name this copy and the earlier one in the report."""
        previous = self._kept.get(doc.id)
        if previous is not None:
            newer = doc.version >= previous[1].version
            self.problems.append(
                RecordProblem(
                    location,
                    f"issue id {doc.id.rsplit(':', 1)[-1]} also at {previous[0]}; kept the "
                    + (f"copy {here} (newer or equal)" if newer else f"{there} newer copy"),
                )
            )
            if not newer:
                return
        self._kept[doc.id] = (location, doc)

    def finish(self) -> JiraRead:
        """The kept issues become ``documents``, in the order their ids were first read; a restricted comment
        is kept only with the copy of its issue that was kept (two copies may list different comments)."""
        kept = [doc for _, doc in self._kept.values()]
        heads = {doc.id: doc.version for doc in kept}
        self.documents = [
            doc for doc in kept if BELONGS_TO not in doc.metadata or heads.get(doc.metadata[BELONGS_TO]) == doc.version
        ]
        return self


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
    """One Jira REST issue object (v2 wiki or v3 ADF bodies) as a Document (its restricted comments left out:
    :func:`issue_to_documents` gives them too).

    Malformed data raises KeyError, TypeError, ValueError or AttributeError, what both readers catch around
    one issue; anything else (a RecursionError...) is raised as a :class:`RecordError`, a ValueError."""
    return issue_to_documents(issue, site)[0]


def issue_to_documents(issue: dict[str, Any], site: str) -> list[Document]:
    """The issue's document, then one document per comment restricted to a role or a group (its family).

    A restricted comment is read only by those who may read the issue *and* hold the comment's role or group
    (``Acl.restricted_to``); indexed in the issue's text it would reach every reader of the issue, and dropped
    its content would be lost. A restriction that names no role or group it can be checked against is dropped,
    as before (counted in ``restricted_comments_dropped``)."""
    try:
        return _issue_to_documents(issue, site)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise
    except Exception as exc:  # still this issue's problem alone
        raise RecordError(f"{type(exc).__name__}: {exc}") from exc


def with_family_acl(documents: list[Document], acl: Acl) -> list[Document]:
    """The family with the issue's readers replaced by ``acl``; each restricted comment keeps its restriction."""
    return [
        doc.model_copy(update={"acl": acl.model_copy(update={"restricted_to": doc.acl.restricted_to})})
        for doc in documents
    ]


def restriction_group(visibility: Any, site: str, project: str) -> str | None:
    """The ACL group a comment's ``visibility`` ({"type": "role"|"group", "value": NAME}) names, or None."""
    if not isinstance(visibility, dict):
        return None
    kind, value = visibility.get("type"), visibility.get("value")
    if not isinstance(value, str) or not value.strip():
        # Cloud names a group by id too (``identifier``); without a name the directory cannot match it.
        return None
    if kind == "role":
        return role_group(site, project, value.strip())
    if kind == "group":
        return jira_group(site, value.strip())
    return None


def _issue_to_documents(issue: dict[str, Any], site: str) -> list[Document]:
    fields = issue["fields"]
    key = issue["key"]
    if not isinstance(key, str) or _ISSUE_KEY.fullmatch(key) is None:
        raise ValueError(f"issue key {shown(key)} is not a Jira issue key (like ABC-123)")
    issue_id = issue["id"]
    if isinstance(issue_id, bool) or not isinstance(issue_id, str | int) or not _ISSUE_ID.fullmatch(str(issue_id)):
        raise ValueError(f"issue id {shown(issue_id)} of {key} is not a Jira issue id")
    # The project key becomes a partition key and a path component: checked here, where every reader's
    # issues enter (the dump and the live API both build documents with this function).
    project = check_container_id(fields["project"]["key"], f"project key of {key}")
    summary = fields.get("summary") or ""
    if not isinstance(summary, str):
        raise ValueError(f"the summary of {key} is not text: {shown(summary)}")
    # The text keeps the summary as written (clean_text removes invisible characters from all of it); the
    # title, shown in one line in result lists, is cleaned further below.
    summary = drop_invisible(summary).strip()
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
    restricted: list[tuple[str, str, dict[str, Any]]] = []  # (comment id, ACL group, comment)
    dropped = 0
    for comment in comments:
        if comment.get("visibility"):
            # Visible to one role or group only: indexed under the issue's wider ACL it would leak, so it becomes
            # its own document under the intersection (below), or is dropped when its restriction is unclear.
            token = restriction_group(comment.get("visibility"), site, project)
            comment_id = str(comment.get("id") or "")
            if token is None or not _COMMENT_ID.fullmatch(comment_id):
                dropped += 1
            else:
                restricted.append((comment_id, token, comment))
            continue
        body = body_text(comment.get("body"))
        if not body:
            continue
        author = _person(comment.get("author")) or "unknown"
        when = str(comment.get("created") or "")[:10]
        comment_lines.append(f"{author} ({when}): {body}")
        if author not in authors:
            authors.append(author)
    if comment_lines:
        parts.append("Comments:\n" + "\n\n".join(comment_lines))
    text = "\n\n".join(parts)
    updated = parse_jira_time(fields["updated"])
    created = parse_jira_time(fields.get("created") or fields["updated"])
    security = fields.get("security")
    acl = _issue_acl(security, site, project, key)
    head_id = issue_document_id(site, str(issue_id))
    members = [
        doc
        for comment_id, token, comment in restricted
        if (doc := _comment_document(head_id, comment_id, token, comment, key, summary, project, site, acl, updated))
    ]
    head = Document(
        id=head_id,
        source=SOURCE,
        container=project,
        title=clean_title(f"{key}: {summary}"),
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
            "restricted_comments": len(members),
            "restricted_comments_dropped": dropped + len(restricted) - len(members),
            "security_level": (security or {}).get("name"),
            # Who asked (the directory's account id of the reporter): a mined query runs as this person.
            "reporter_account": _account_id(fields.get("reporter")) or _account_id(fields.get("creator")),
            **({FAMILY: [m.id for m in members]} if members else {}),
        },
    )
    return [head, *members]


def _comment_document(
    head_id: str,
    comment_id: str,
    token: str,
    comment: dict[str, Any],
    key: str,
    summary: str,
    project: str,
    site: str,
    acl: Acl,
    updated: datetime,
) -> Document | None:
    """A restricted comment as its own document: the issue's readers intersected with the comment's role or
    group, the issue's version (written, replaced and removed with it), the issue's key and summary for context."""
    body = body_text(comment.get("body"))
    if not body:
        return None
    author = _person(comment.get("author")) or "unknown"
    when = str(comment.get("created") or "")[:10]
    text = f"{key}: {summary}\n\nRestricted comment by {author} ({when}): {body}"
    created = parse_jira_time(comment["created"]) if comment.get("created") else updated
    visibility = comment.get("visibility") or {}
    return Document(
        id=comment_document_id(head_id, comment_id),
        source=SOURCE,
        container=project,
        title=clean_title(f"{key}: {summary} (restricted comment)"),
        text=text,
        url=f"https://{site}/browse/{key}?focusedCommentId={comment_id}",
        authors=(author,),
        created=min(created, updated),
        updated=updated,
        version=updated.timestamp(),
        content_hash=content_hash(text),
        acl=acl.model_copy(update={"restricted_to": (token,)}),
        metadata={
            "key": key,
            BELONGS_TO: head_id,
            "visibility": {"type": visibility.get("type"), "value": visibility.get("value")},
        },
    )


def _issue_acl(security: Any, site: str, project: str, key: str) -> Acl:
    """The readers of an issue: its security level's group, or the project's browsers when it has no level.

    Only ``null`` (or, in a dump, no ``security`` field: the bundled dump and dumps of sites without issue security
    carry none) means "no level". A level that is not an object with an id or a name (``{}``, ``false``, a bare
    string) says the issue is restricted without saying to whom: the issue is not read (ValueError, the reader's
    problem), never shown to the whole project. The live reader, which asks for the field by name, treats an
    answer without it as unknown (``JiraApiReader._document``)."""
    if security is None:
        return Acl(groups=(project_group(site, project),))
    level = security.get("id") or security.get("name") if isinstance(security, dict) else None
    if isinstance(level, bool) or not isinstance(level, str | int) or not str(level).strip():
        raise ValueError(f"security level {shown(security)} of {key} names no level id; not indexed")
    return Acl(groups=(security_level_group(site, str(level)),))


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


def _account_id(person: Any) -> str | None:
    """A person's account id as the principal directory keys it (Cloud accountId, else the Server name or key)."""
    if not isinstance(person, dict):
        return None
    for candidate in (person.get("accountId"), person.get("name"), person.get("key")):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    return None


def _person(person: dict[str, Any] | None) -> str | None:
    if not isinstance(person, dict):
        return None
    for candidate in (person.get("displayName"), person.get("name"), person.get("accountId")):
        if isinstance(candidate, str) and candidate:
            # Names head every comment in the text: a line break in one could forge a comment. Otherwise the
            # name stays as written (clean_text removes invisible characters), so the text, its hash and its
            # chunks do not change for well-formed names.
            return " ".join(drop_invisible(candidate).splitlines())
    return None


def read_comment_visibility(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """A comment-visibility overlay (``{"comments": [{"issue", "comment", "visibility"}]}``) by (key, comment id)."""
    listed = json.loads(path.read_text(encoding="utf-8"))["comments"]
    return {(str(c["issue"]), str(c["comment"])): dict(c["visibility"]) for c in listed}


class JiraDumpReader:
    """Reads a JSON-lines dump (optionally gzipped) of Jira REST issue objects."""

    def __init__(
        self, path: str | Path, site: str, comment_visibility: Mapping[tuple[str, str], dict[str, Any]] | None = None
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"Jira dump not found: {self.path}")
        self.site = site
        # (issue key, comment id) -> a visibility to read that comment with (the bundled dump's overlay).
        self.comment_visibility = dict(comment_visibility or {})

    def _lines(self, problems: list[RecordProblem]) -> Iterator[tuple[int, bytes]]:
        """Numbered raw lines. Lines are decoded one by one (a bad byte costs its line, not the file); a
        truncated or corrupt .gz ends the lines where it broke, with a problem saying where. A file that
        breaks before its first line (a ``.gz`` that is not gzip, a damaged header) is
        :class:`UnreadableSource`: reporting it as one skipped record would index nothing and exit 0."""
        return numbered_lines(self.path, "Jira dump", problems)

    def _issues(self, problems: list[RecordProblem]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(location, issue object) of every line holding one; every other line is a problem."""
        for location, raw in located_lines(self.path, self._lines(problems), _KEY_HINT, " ({})"):
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                problems.append(
                    RecordProblem(location, f"invalid UTF-8 at byte {exc.start:,} of the line; read with U+FFFD")
                )
                text = raw.decode("utf-8-sig", errors="replace")
            issue = json_object(text, location, "a Jira issue object", problems)
            if issue is not None:
                yield location, issue

    def issues(self, problems: list[RecordProblem]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(location, issue object) of every line holding one, bad lines added to ``problems``."""
        return self._issues(problems)

    def read(self, projects: Iterable[str] | None = None) -> JiraRead:
        """Every issue of the given projects (all when None); bad lines are reported, not fatal. An issue id
        seen twice is kept once, in its newest version (ties: the later line), and reported."""
        wanted = set(projects) if projects is not None else None
        out = JiraRead()
        for location, issue in self._issues(out.problems):
            try:
                project = issue["fields"]["project"]["key"]
            except (KeyError, TypeError) as exc:
                out.problems.append(RecordProblem(location, f"not a Jira issue object: {describe(exc)}"))
                continue
            # A malformed key is left to issue_to_document, which reports it.
            if wanted is not None and isinstance(project, str) and project not in wanted:
                continue
            try:
                family = issue_to_documents(self._with_visibility(issue), self.site)
            except Exception as exc:  # one issue's data never ends the read
                out.problems.append(RecordProblem(_with_key(location, issue), describe(exc)))
                continue
            for doc in family:
                out.keep_newest(location, doc, "on this line", "earlier line's")
        return out.finish()

    def _with_visibility(self, issue: dict[str, Any]) -> dict[str, Any]:
        """The issue with the overlay's visibilities on its comments (a copy; the issue itself when none apply)."""
        key = issue.get("key")
        comments = ((issue.get("fields") or {}).get("comment") or {}).get("comments") or []
        if not self.comment_visibility or not any((key, str(c.get("id"))) in self.comment_visibility for c in comments):
            return issue
        marked = [
            {**c, "visibility": self.comment_visibility[(key, str(c.get("id")))]}
            if (key, str(c.get("id"))) in self.comment_visibility
            else c
            for c in comments
        ]
        fields = {**issue["fields"], "comment": {**issue["fields"]["comment"], "comments": marked}}
        return {**issue, "fields": fields}

    def key_to_document_id(self) -> dict[str, str]:
        """Issue key -> document id, for turning key-based eval sets into document ids."""
        mapping = {}
        for _, issue in self._issues([]):
            key, issue_id = issue.get("key"), issue.get("id")
            if isinstance(key, str) and isinstance(issue_id, str | int):
                mapping[key] = issue_document_id(self.site, str(issue_id))
        return mapping


def _with_key(location: str, issue: dict[str, Any]) -> str:
    key = issue.get("key")
    return location if location.endswith(")") or not isinstance(key, str) else f"{location} ({shown(key, 40)})"
