"""Confluence dump reader: JSON lines of REST v1 content objects, one document per page or blog post.

The format (one JSON object per line, UTF-8, gzipped when the name ends in ``.gz``):

* a page or blog post, as ``GET /rest/api/content/{id}`` (or a CQL search) returns it with
  ``expand=body.storage,ancestors,space,version,history,metadata.labels,restrictions.read.restrictions.user,
  restrictions.read.restrictions.group``: ``{"id": "123", "type": "page" | "blogpost", "status": "current",
  "title": …, "space": {"key": "ENG", "name": …}, "ancestors": [{"id", "title"}, …] (root first),
  "body": {"storage": {"value": "<p>…</p>"}}, "version": {"number", "when", "by"}, "history": {"createdDate",
  "createdBy"}, "metadata": {"labels": {"results": [{"name"}]}}, "restrictions": {"read": {"restrictions":
  {"user": {"results": […]}, "group": {"results": […]}}}}, "_links": {"base", "webui"}}``;
* a comment, on its own line: ``{"type": "comment", "id", "container": {"id": <page id>}, "body": {"storage":
  …}, "history": {"createdBy", "createdDate"}, "extensions": {"location": "inline" | "footer",
  "inlineProperties": {"originalSelection"}}}``;
* optionally a space's view permissions: ``{"type": "space", "key": "ENG", "name": …, "permissions": [REST v1
  space permission objects], "anonymous": bool}`` (``anonymous``: anonymous users may view it; its pages are
  public).

A page line without ``restrictions``, or whose ancestor's restrictions the dump does not hold (the ancestor's own
line or its entry in ``ancestors``), fails closed: its document admits nobody and a problem names it. One bad line
is a :class:`RecordProblem` naming the line (and the page id where it can be found); the rest are read. Pages whose
``status`` is ``trashed`` or ``deleted`` are not indexed and are listed in :attr:`ConfluenceRead.removed` for
reconciliation; drafts and historical versions are skipped. The whole dump is held in memory (comments and
ancestors may come on any line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.atlassian.dump_lines import json_object, located_lines
from rag_pipeline.connectors.confluence.acl import ReadRestriction, SpaceGrants, document_acl, read_restriction
from rag_pipeline.connectors.confluence.acl import space_grants as parse_space_grants
from rag_pipeline.connectors.confluence.document import (
    CONTENT_TYPES,
    GONE_STATUSES,
    content_id,
    content_to_document,
    obj_of,
    page_document_id,
)
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.json_lines import numbered_lines
from rag_pipeline.sources.problems import RecordProblem, SourceError, describe, shown

# The id of a line that is not valid JSON, to name it in the problem (a content object's first "id").
_ID_HINT = re.compile(rb'"id"\s*:\s*"?([0-9A-Za-z_-]{1,64})')


@dataclass
class ConfluenceRead:
    """Documents read from a dump, the records that could not be read, and the pages gone at the source."""

    documents: list[Document] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # document ids of trashed or deleted pages


@dataclass
class DumpContents:
    """A dump's records by kind: pages (and blog posts) by id with their line, comments by page, spaces by key."""

    pages: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    comments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    spaces: dict[str, SpaceGrants] = field(default_factory=dict)
    space_names: dict[str, str] = field(default_factory=dict)
    gone: dict[str, str] = field(default_factory=dict)  # page id -> location of a trashed/deleted record
    problems: list[RecordProblem] = field(default_factory=list)


def _version_key(content: Mapping[str, Any]) -> tuple[int, str]:
    version = obj_of(content.get("version"))
    number = version.get("number")
    return (number if isinstance(number, int) and not isinstance(number, bool) else -1, str(version.get("when") or ""))


class ConfluenceDumpReader:
    """Reads a JSON-lines dump (optionally gzipped) of Confluence REST content objects."""

    def __init__(self, path: str | Path, site: str) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"Confluence dump not found: {self.path} (--confluence-dump, RAG_CONFLUENCE_DUMP)")
        self.site = site

    def _lines(self, problems: list[RecordProblem]) -> Iterator[tuple[int, bytes]]:
        """Numbered raw lines; a damaged .gz ends them where it broke (a problem says where); a file that breaks
        before its first line is :class:`UnreadableSource`."""
        return numbered_lines(self.path, "Confluence dump", problems)

    def records(self, problems: list[RecordProblem]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(location, object) of every line holding a JSON object; every other line is a problem."""
        for location, raw in located_lines(self.path, self._lines(problems), _ID_HINT, " (id {})"):
            text = raw.decode("utf-8-sig", errors="replace")
            record = json_object(text, location, "a Confluence content object", problems)
            if record is not None:
                yield location, record

    def contents(self) -> DumpContents:
        """Every record of the dump sorted by kind; a page id seen twice keeps its newest version."""
        out = DumpContents()
        for location, record in self.records(out.problems):
            kind = record.get("type")
            try:
                if kind == "space":
                    self._space(record, out)
                elif kind == "comment":
                    container = record.get("container")
                    page_id = content_id(container) if isinstance(container, Mapping) else None
                    if page_id is None:
                        raise ValueError(f"comment {shown(record.get('id'))} names no container page")
                    out.comments.setdefault(page_id, []).append(record)
                elif kind in CONTENT_TYPES:
                    self._page(location, record, out)
                else:
                    out.problems.append(RecordProblem(location, f"content type {shown(kind)} is not read"))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                out.problems.append(RecordProblem(location, describe(exc)))
        return out

    def _space(self, record: dict[str, Any], out: DumpContents) -> None:
        key = record.get("key")
        if not isinstance(key, str) or not key:
            raise ValueError(f"space record names no key: {shown(key)}")
        out.spaces[key] = parse_space_grants(key, record.get("permissions"), record.get("anonymous") is True)
        if isinstance(record.get("name"), str):
            out.space_names[key] = record["name"]

    def _page(self, location: str, record: dict[str, Any], out: DumpContents) -> None:
        page_id = content_id(record)
        status = record.get("status", "current")
        if status in GONE_STATUSES:
            out.gone[page_id] = location
            return
        if status not in ("current", None):
            return  # a draft or a historical version: not what readers see
        previous = out.pages.get(page_id)
        if previous is not None:
            newer = _version_key(record) >= _version_key(previous[1])
            kept = "this line (newer or equal)" if newer else "the earlier line's newer copy"
            out.problems.append(RecordProblem(location, f"page id {page_id} also at {previous[0]}; kept {kept}"))
            if not newer:
                return
        out.pages[page_id] = (location, record)

    def read(self, spaces: Iterable[str] | None = None) -> ConfluenceRead:
        """Every page and blog post of the given spaces (all when None); bad lines are reported, not fatal."""
        wanted = set(spaces) if spaces is not None else None
        contents = self.contents()
        out = ConfluenceRead(problems=list(contents.problems))
        for page_id in contents.gone:
            if page_id not in contents.pages:
                out.removed.append(page_document_id(self.site, page_id))
        for page_id, (location, page) in contents.pages.items():
            space = page.get("space")
            key = space.get("key") if isinstance(space, Mapping) else None
            if wanted is not None and key not in wanted:
                continue
            try:
                chain, why = dump_chain(page, contents)
                grants = contents.spaces.get(str(key))
                acl = document_acl(self.site, str(key), grants.anonymous if grants else False, chain)
                built = content_to_document(
                    page, self.site, acl, contents.comments.get(page_id, ()), contents.space_names.get(str(key))
                )
            except Exception as exc:  # one page's data never ends the read
                out.problems.append(RecordProblem(location, describe(exc)))
                continue
            if chain is None:
                out.problems.append(
                    RecordProblem(location, f"{why}; page {page_id} is indexed readable by nobody (fail closed)")
                )
            out.problems.extend(built.problems)
            out.documents.append(built.document)
        return out


def dump_chain(page: Mapping[str, Any], contents: DumpContents) -> tuple[list[ReadRestriction] | None, str]:
    """The read restrictions from the space root down to ``page`` (root first), or (None, why) when one of them
    is not in the dump: the page's own ``restrictions``, each ancestor's own line or its entry in ``ancestors``."""
    page_id = content_id(page)
    chain: list[ReadRestriction] = []
    ancestors = page.get("ancestors") if page.get("type") == "page" else []
    for ancestor in ancestors or []:
        ancestor_id = content_id(ancestor)
        source = ancestor if "restrictions" in ancestor else (contents.pages.get(ancestor_id) or (None, None))[1]
        if source is None:
            return None, f"ancestor {ancestor_id}'s read restrictions are not in the dump"
        try:
            chain.append(read_restriction(ancestor_id, (source.get("restrictions") or {}).get("read")))
        except ValueError as exc:
            return None, str(exc)
    if "restrictions" not in page:
        return None, f"page {page_id} carries no restrictions (expand restrictions.read.restrictions.user,group)"
    try:
        chain.append(read_restriction(page_id, (page.get("restrictions") or {}).get("read")))
    except ValueError as exc:
        return None, str(exc)
    return chain, ""
