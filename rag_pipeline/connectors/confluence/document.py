"""One Confluence page or blog post (a REST v1 content object) and its comments as one Document.

Both readers (the dump and the live API) build documents here, so the same page gives the same document
whichever read it: id ``confluence:<site>:<pageId>``, the space key as container, the title path ``Space ›
Ancestor › … › Page``, and a text of that path, the body, the labels and every comment (inline and footer, with
author). The ACL is the caller's: it depends on restrictions along the page tree, which each reader resolves.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from rag_pipeline.connectors.confluence.acl import person_id
from rag_pipeline.connectors.confluence.storage import storage_text
from rag_pipeline.sources.document import Acl, Document, content_hash, utc_instant
from rag_pipeline.sources.identifiers import check_container_id
from rag_pipeline.sources.problems import RecordError, RecordProblem, shown
from rag_pipeline.text.clean import clean_title, drop_invisible

SOURCE = "confluence"
CONTENT_TYPES = ("page", "blogpost")
# Statuses of content that is gone at the source: reported so reconciliation can remove it.
GONE_STATUSES = ("trashed", "deleted")
# Content ids are numbers in Confluence; they end up in document ids and URLs.
_CONTENT_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")
TITLE_SEPARATOR = " › "


def obj_of(value: object) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one (optional parts of a record may be null or absent)."""
    return value if isinstance(value, Mapping) else {}


def page_document_id(site: str, page_id: str) -> str:
    return f"{SOURCE}:{site}:{page_id}"


def content_id(content: Mapping[str, Any]) -> str:
    """The content's id, checked (ValueError otherwise): it becomes part of a document id."""
    raw = content.get("id")
    if isinstance(raw, bool) or not isinstance(raw, str | int) or not _CONTENT_ID.fullmatch(str(raw)):
        raise ValueError(f"content id {shown(raw)} is not a Confluence content id")
    return str(raw)


def parse_confluence_time(value: object) -> datetime:
    """Confluence timestamps (``2024-03-01T10:15:30.123Z``, ``…+01:00``); ValueError for anything else."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"timestamp {shown(value)} is not a string")
    parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without timezone: {value!r}")
    return utc_instant(parsed)


def person_name(person: object) -> str | None:
    """A person's display name (one line), else their id."""
    if not isinstance(person, Mapping):
        return None
    for candidate in (person.get("displayName"), person.get("publicName"), person_id(person)):
        if isinstance(candidate, str) and candidate.strip():
            # Names head every comment in the text: a line break in one could forge a comment.
            return " ".join(drop_invisible(candidate).split())
    return None


def ancestors_of(content: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ``ancestors`` (root first) of a page; ValueError when they are not a list of objects with ids."""
    raw = content.get("ancestors") or []
    if not isinstance(raw, list) or not all(isinstance(a, Mapping) for a in raw):
        raise ValueError(f"ancestors {shown(raw)} are not a list of content objects")
    for ancestor in raw:
        content_id(ancestor)
    return raw


def space_key_of(content: Mapping[str, Any], where: str) -> str:
    space = content.get("space")
    key = space.get("key") if isinstance(space, Mapping) else None
    return check_container_id(key, f"Confluence space key of {where}")


def _people(content: Mapping[str, Any], comments: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Account id, user key or username -> display name of everyone the objects name (for mentions)."""
    found: dict[str, str] = {}
    for item in (content, *comments):
        history = obj_of(item.get("history"))
        version = obj_of(item.get("version"))
        for person in (history.get("createdBy"), version.get("by")):
            if isinstance(person, Mapping) and isinstance(person.get("displayName"), str):
                for key in ("accountId", "username", "userKey"):
                    if isinstance(person.get(key), str):
                        found[person[key]] = person["displayName"]
    return found


@dataclass
class Built:
    """A built document and what could not be read of it (an unreadable body, a bad comment)."""

    document: Document
    problems: list[RecordProblem] = field(default_factory=list)


def content_to_document(
    content: Mapping[str, Any],
    site: str,
    acl: Acl,
    comments: Sequence[Mapping[str, Any]] = (),
    space_name: str | None = None,
    base_url: str | None = None,
) -> Built:
    """A page or blog post as a Document with ``acl``. Malformed data raises KeyError, TypeError, ValueError or
    AttributeError (each reader reports the record); anything else is raised as a :class:`RecordError`."""
    try:
        return _content_to_document(content, site, acl, comments, space_name, base_url)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise
    except Exception as exc:  # a RecursionError...: still this page's problem alone
        raise RecordError(f"{type(exc).__name__}: {exc}") from exc


def _content_to_document(
    content: Mapping[str, Any],
    site: str,
    acl: Acl,
    comments: Sequence[Mapping[str, Any]],
    space_name: str | None,
    base_url: str | None,
) -> Built:
    page_id = content_id(content)
    where = f"confluence page {page_id}"
    kind = content.get("type")
    if kind not in CONTENT_TYPES:
        raise ValueError(f"content type {shown(kind)} of {page_id} is not a page or blog post")
    space_key = space_key_of(content, where)
    space = content.get("space") or {}
    space_title = space_name or (space.get("name") if isinstance(space.get("name"), str) else None) or space_key
    title = content.get("title")
    if not isinstance(title, str):
        raise ValueError(f"the title of {page_id} is not text: {shown(title)}")
    ancestors = ancestors_of(content) if kind == "page" else []
    path = [space_title, *(str(a.get("title") or a.get("id")) for a in ancestors), title]
    if len(path) > 2 and path[1] == space_title:
        # A space's home page usually bears the space's name: "Docs › Docs › Setup" says nothing twice.
        path.pop(1)
    title_path = clean_title(TITLE_SEPARATOR.join(drop_invisible(p).strip() for p in path))
    problems: list[RecordProblem] = []
    users = _people(content, comments)
    body = ((content.get("body") or {}).get("storage") or {}).get("value")
    read = storage_text(body, where, users)
    if read.problem:
        problems.append(read.problem)
    labels = _labels(content)
    parts = [title_path]
    if read.text:
        parts.append(read.text)
    if labels:
        parts.append("Labels: " + ", ".join(labels))
    authors: list[str] = []
    history = obj_of(content.get("history"))
    version = obj_of(content.get("version"))
    for person in (history.get("createdBy"), version.get("by")):
        name = person_name(person)
        if name and name not in authors:
            authors.append(name)
    comment_lines = []
    for comment in sorted(comments, key=_comment_order):
        line = _comment_line(comment, users, problems)
        if line is None:
            continue
        comment_lines.append(line[1])
        if line[0] not in authors:
            authors.append(line[0])
    if comment_lines:
        parts.append("Comments:\n" + "\n\n".join(comment_lines))
    text = "\n\n".join(parts)
    updated = parse_confluence_time(version.get("when") or history.get("createdDate"))
    created = parse_confluence_time(history.get("createdDate")) if history.get("createdDate") else updated
    number = version.get("number")
    document = Document(
        id=page_document_id(site, page_id),
        source=SOURCE,
        container=space_key,
        title=title_path,
        text=text,
        url=_url(content, site, page_id, base_url),
        authors=tuple(authors),
        created=min(created, updated),
        updated=updated,
        version=updated.timestamp(),
        content_hash=content_hash(text),
        acl=acl,
        metadata={
            "page_id": page_id,
            # Who wrote it (the directory's account id): a query mined from the page runs as this person.
            "author_account": person_id(history.get("createdBy")) or person_id(version.get("by")),
            "content_type": kind,
            "space": space_key,
            "space_name": space_title,
            "ancestors": [str(a["id"]) for a in ancestors],
            "labels": labels,
            "version_number": number if isinstance(number, int) and not isinstance(number, bool) else None,
            "comment_count": len(comment_lines),
        },
    )
    return Built(document, problems)


def _labels(content: Mapping[str, Any]) -> list[str]:
    labels = ((content.get("metadata") or {}).get("labels") or {}).get("results") or []
    names = [str(label.get("name")).strip() for label in labels if isinstance(label, Mapping) and label.get("name")]
    return sorted(dict.fromkeys(n for n in names if n))


def _comment_order(comment: Mapping[str, Any]) -> tuple[str, str]:
    history = obj_of(comment.get("history"))
    return (str(history.get("createdDate") or ""), str(comment.get("id") or ""))


def _comment_line(
    comment: Mapping[str, Any], users: Mapping[str, str], problems: list[RecordProblem]
) -> tuple[str, str] | None:
    """(author, ``Author (date, inline on "selection"): text``) of one comment; None when it has no text."""
    where = f"confluence comment {comment.get('id', '?')}"
    if comment.get("status") not in (None, "current"):
        return None
    body = ((comment.get("body") or {}).get("storage") or {}).get("value")
    read = storage_text(body, where, users)
    if read.problem:
        problems.append(read.problem)
    if not read.text:
        return None
    history = obj_of(comment.get("history"))
    version = obj_of(comment.get("version"))
    author = person_name(history.get("createdBy")) or person_name(version.get("by")) or "unknown"
    when = str(history.get("createdDate") or version.get("when") or "")[:10]
    extensions = obj_of(comment.get("extensions"))
    location = extensions.get("location")
    detail = when
    if location == "inline":
        selection = (extensions.get("inlineProperties") or {}).get("originalSelection")
        quoted = f' on "{" ".join(str(selection).split())[:200]}"' if selection else ""
        detail = f"{when}, inline{quoted}" if when else f"inline{quoted}"
    return author, f"{author} ({detail}): {read.text}"


def _url(content: Mapping[str, Any], site: str, page_id: str, base_url: str | None) -> str:
    """The page's web address: ``_links.base`` + ``_links.webui``, on the site's host (a dump taken through another
    host keeps its context path, e.g. ``/wiki``, but links to the site), else the site's ``viewpage.action``."""
    links = obj_of(content.get("_links"))
    webui = links.get("webui")
    base = next((b for b in (base_url, links.get("base")) if isinstance(b, str) and b.startswith("http")), None)
    root = f"https://{site}" + (urlsplit(base).path.rstrip("/") if base else "")
    if base and urlsplit(base).netloc == site:
        root = base.rstrip("/")
    if isinstance(webui, str) and webui.startswith("/"):
        return root + webui
    return f"{root}/pages/viewpage.action?pageId={page_id}"
