"""Confluence REST reader: space discovery, (day x space) page reads, page listings for reconciliation, space
permissions and group members for the directory, through atlassian-python-api's ``Confluence`` client (REST v1).

A (day D, space S) read returns every page and blog post of S whose last modification (``version.when``) lies in
[D, D+1) UTC, found with CQL ``space = "S" and type in (page, blogpost) and lastModified >= "yyyy/MM/dd HH:mm" and
lastModified < "…" order by created asc``. CQL dates have minute precision and are read in the API user's time
zone, so the reader asks for that zone (``user/current``; unknown: the window is widened by 14 hours each side)
and still filters the returned instants exactly; the window starts ``overlap_minutes`` early (search is
eventually consistent), pages found in the overlap going to the first day. Ordering by creation keeps offsets
stable while pages are edited during the read.

Each page comes with its storage body, ancestors, labels and own read restriction (expanded in the search), its
comments (paged, only where the page has any) and its ancestors' read restrictions (``restriction/byOperation``,
cached per reader). A restriction that cannot be read fails the page closed (readable by nobody, and reported).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import requests
from atlassian import Confluence
from atlassian.errors import ApiError
from pydantic import Field

from rag_pipeline.connectors.atlassian.reader import AtlassianReader, AtlassianSyncSettings, ProductWords
from rag_pipeline.connectors.atlassian.reads import ContainerRead, DayWindow, ListedContainer, NewestVersions
from rag_pipeline.connectors.confluence.acl import (
    ReadRestriction,
    SpaceGrants,
    document_acl,
    read_restriction,
    space_grants,
)
from rag_pipeline.connectors.confluence.client import endpoint_of
from rag_pipeline.connectors.confluence.document import (
    content_id,
    content_to_document,
    page_document_id,
    parse_confluence_time,
)
from rag_pipeline.sources.document import Acl, Document
from rag_pipeline.sources.problems import RecordProblem, SourceError

# What content_to_document reads, plus the first comments (to skip the comment call for pages without any).
PAGE_EXPAND = (
    "body.storage,ancestors,space,version,history,metadata.labels,children.comment,"
    "restrictions.read.restrictions.user,restrictions.read.restrictions.group"
)
LISTING_EXPAND = "ancestors,restrictions.read.restrictions.user,restrictions.read.restrictions.group"
COMMENT_EXPAND = "body.storage,history,version,extensions.inlineProperties"
MAX_SPACE_NAME_LENGTH = 200
# CQL's date format: minute precision, in the API user's time zone.
CQL_TIME = "%Y/%m/%d %H:%M"
WORDS = ProductWords(
    name="Confluence",
    container="space",
    server="Data Center",
    see="view",
    grant="grant it view permission",
    context=", e.g. https://acme.atlassian.net/wiki",
)


class ConfluenceSyncSettings(AtlassianSyncSettings):
    """How the live connector reads a Confluence site (the shared fields: :class:`AtlassianSyncSettings`)."""

    page_size: int = Field(50, ge=1, le=1000, description="Pages per search page (with bodies)")
    id_page_size: int = Field(200, ge=1, le=1000, description="Pages per listing page in reconciliation")
    comment_page_size: int = Field(100, ge=1, le=1000, description="Comments per page")
    member_page_size: int = Field(50, ge=1, le=1000, description="Group members per page (Cloud caps it at 50)")
    space_allow: tuple[str, ...] = Field((), description="Space keys or regexes to keep (empty: all)")
    space_deny: tuple[str, ...] = Field((), description="Space keys or regexes to skip")
    include_personal: bool = Field(True, description="Discover personal spaces (~user) too")

    def wants(self, space: ConfluenceSpace) -> bool:
        """Whether discovery keeps a space (personal ones as set; deny wins over allow)."""
        if space.personal and not self.include_personal:
            return False
        return self._wanted(space, self.space_allow, self.space_deny)


@dataclass(frozen=True)
class ConfluenceSpace(ListedContainer):
    """A space as the listing shows it."""

    personal: bool = False


class ConfluenceAccessError(SourceError):
    """The site or one space cannot be read; the message says what to change."""


class ConfluenceTimeoutError(ConfluenceAccessError):
    """A call got no complete answer within the timeout or deadline, after every retry."""


@dataclass
class SpaceDiscovery:
    """What space discovery found: the spaces to read and listings left out (a key that cannot be a partition
    key, an entry that is not a space)."""

    spaces: list[ConfluenceSpace] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)


@dataclass
class SpaceRead(ContainerRead):
    """Pages of one space for a set of days, and where each belongs (the shape of Jira's ``ProjectRead``)."""

    pages_fetched: int = 0


@dataclass(frozen=True)
class ListedPage:
    """A page as the reconciliation listing shows it: its ancestors (root first) and its own read restriction
    (None when the listing's restriction could not be read)."""

    page_id: str
    space: str
    ancestors: tuple[str, ...]
    restriction: ReadRestriction | None


class ConfluenceApiReader(AtlassianReader[ConfluenceSyncSettings]):
    """Reads a Confluence site through the client; one instance per run (it caches zones, grants, restrictions)."""

    client: Confluence
    words = WORDS
    query_time = CQL_TIME
    access_error = ConfluenceAccessError
    timeout_error = ConfluenceTimeoutError
    # The library raises its ApiError (carrying the response in its cause) for some failed calls.
    transport_errors = (requests.exceptions.RequestException, ApiError)

    def _start_caches(self) -> None:
        self._restrictions: dict[str, ReadRestriction] = {}
        self._grants: dict[str, SpaceGrants] = {}

    def endpoint_of(self, path: str) -> str:
        return endpoint_of(path)

    def document_id(self, page_id: str) -> str:
        return page_document_id(self.site, page_id)

    # --- calls ------------------------------------------------------------------------------------
    def _next_url(self, page: Any) -> str | None:
        """The absolute URL of ``_links.next``, resolved against the client's own URL: a next link naming another
        host is refused (it would receive the credentials), so the listing fails rather than follow it."""
        links = page.get("_links") if isinstance(page, dict) else None
        nxt = links.get("next") if isinstance(links, dict) else None
        if not isinstance(nxt, str) or not nxt:
            return None
        if nxt.startswith(("http://", "https://")):
            if urlsplit(nxt).netloc != urlsplit(self.base_url).netloc:
                raise ConfluenceAccessError(f"Confluence handed out a next link to another host ({nxt[:80]!r})")
            return nxt
        context = urlsplit(self.base_url).path.rstrip("/")
        path = nxt if not context or not nxt.startswith(context + "/") else nxt[len(context) :]
        return self.base_url + "/" + path.lstrip("/")

    def paged(self, what: str, where: str | None, resource: str, first: Callable[[], Any]) -> Iterator[dict[str, Any]]:
        """The ``results`` of a v1 listing: the first page from ``first()``, then each ``_links.next`` (start/limit
        offsets on Data Center, cursors on Cloud) under one page guard."""
        guard = self._guard(resource, where)
        page = self._call(what, where, first) or {}
        while True:
            results = page.get("results") if isinstance(page, dict) else None
            if not isinstance(results, list):
                raise ConfluenceAccessError(f"Confluence answered {what} for {where or 'the site'} without results")
            yield from (r for r in results if isinstance(r, dict))
            url = self._next_url(page)
            guard.page(len(results), url)
            if url is None:
                return
            page = self._call(what, where, self.client.get, url, absolute=True) or {}

    # --- site ---------------------------------------------------------------------------------------
    def _profile(self) -> Any:
        # An unreadable profile leaves the zone unknown (the window widens) rather than failing the read.
        try:
            return self._call("read the API user's profile", None, self.client.get, "rest/api/user/current")
        except ConfluenceAccessError:
            return None

    def discover_spaces(self) -> list[ConfluenceSpace]:
        return self.discover().spaces

    def discover(self) -> SpaceDiscovery:
        """Spaces the API user can view, minus the allow/deny filters (and archived or personal ones as set); a
        listing whose key cannot be a partition key (a personal ``~user`` key included) is a problem."""
        out = SpaceDiscovery()
        status = None if self.settings.include_archived else "current"
        size = 50

        def first() -> Any:
            return self.client.get_all_spaces(start=0, limit=size, space_status=status)

        for number, raw in enumerate(self.paged("list spaces", None, "space", first), start=1):
            personal = raw.get("type") == "personal"
            if personal and not self.settings.include_personal:
                continue
            listed = self._listed(raw, number, MAX_SPACE_NAME_LENGTH, out.problems)
            if listed is None:
                continue
            key, name = listed
            archived = raw.get("status") == "archived"
            space = ConfluenceSpace(key, str(raw.get("id", "")), name, archived=archived, personal=personal)
            if self.settings.wants(space):
                out.spaces.append(space)
        return out

    def space_exists(self, space_key: str) -> bool:
        """Whether the API user can still view the space (False on 404: deleted, or permission revoked)."""
        found = self._call("read a space", f"space {space_key}", self.client.get, f"rest/api/space/{space_key}",
                           missing_ok=True)  # fmt: skip
        return found is not None

    def space_grants(self, space_key: str, fresh: bool = False) -> SpaceGrants:
        """Who may view the space (``space?expand=permissions``), cached per reader unless ``fresh``."""
        if space_key in self._grants and not fresh:
            return self._grants[space_key]
        where = f"space {space_key}"
        space = self._call("read space permissions", where, self.client.get_space, space_key, expand="permissions")
        try:
            grants = space_grants(space_key, (space or {}).get("permissions"))
        except ValueError as exc:
            raise ConfluenceAccessError(f"the permissions of space {space_key} cannot be read: {exc}") from None
        self._grants[space_key] = grants
        return grants

    def _anonymous(self, space_key: str, problems: list[RecordProblem]) -> bool:
        """Whether anonymous users may view the space; an unreadable answer counts as no (narrower) and is
        reported once per read."""
        try:
            return self.space_grants(space_key).anonymous
        except ConfluenceAccessError as exc:
            where = f"confluence space {space_key}"
            if not any(p.location == where for p in problems):
                problems.append(RecordProblem(where, f"space permissions unreadable ({exc}); its pages are not public"))
            return False

    # --- search ---------------------------------------------------------------------------------------
    def search(self, cql: str, expand: str, page_size: int, where: str | None = None) -> Iterator[dict[str, Any]]:
        """Every content object a CQL query matches (``content/search``), bounded by the page guard."""

        def first() -> Any:
            return self.client.search_content(cql, start=0, limit=page_size, expand=expand)

        return self.paged("search content", where, "content/search", first)

    def window_cql(self, space_key: str, start: datetime, end: datetime) -> str:
        """The CQL of pages and blog posts of a space modified in [start, end) (widened to whole minutes, and by
        14 hours each side when the user's zone is unknown)."""
        after, before = self._query_bounds(start, end)
        return (
            f'space = "{space_key}" and type in (page, blogpost) and lastModified >= "{after}" and lastModified < '
            f'"{before}" order by created asc'
        )

    # --- pages ----------------------------------------------------------------------------------------
    def read_days(self, space_key: str, days: Iterable[str]) -> SpaceRead:
        """Pages and blog posts of a space modified on any of ``days`` (UTC, YYYY-MM-DD), plus those modified in
        the overlap before the first day (assigned to the first day)."""
        out = SpaceRead()
        window = DayWindow.covering(days, self.settings.overlap_minutes)
        if window is None:
            return out
        with self._budgeted(space_key, len(window.days)):
            cql = self.window_cql(space_key, window.start, window.end)
            newest: NewestVersions[dict[str, Any]] = NewestVersions(window)
            for content in self.search(cql, PAGE_EXPAND, self.settings.page_size, f"space {space_key}"):
                out.pages_fetched += 1
                try:
                    page_id = content_id(content)
                    updated = parse_confluence_time((content.get("version") or {}).get("when"))
                except (TypeError, ValueError, AttributeError) as exc:
                    out.problems.append(RecordProblem(_where(content), f"unreadable: {type(exc).__name__}: {exc}"))
                    continue
                newest.offer(page_id, updated, content)
            for day, content in newest.by_day():
                doc = self._document(content, out)
                if doc is not None:
                    out.place(doc, day)
        self._log(
            f"{space_key}: {len(out.documents)} pages modified on {len(window.days)} day(s) ({out.pages_fetched} "
            f"listed, {out.comment_pages} comment pages, {len(out.problems)} problems)"
        )
        return out

    def _document(self, content: dict[str, Any], out: SpaceRead) -> Document | None:
        """One page as its Document, with its comments and its chain's ACL; a bad body is a problem, not a failure.
        Transport errors propagate: a partition must not succeed without a page it could not read."""
        try:
            space_key = str((content.get("space") or {}).get("key"))
            comments = self._comments(content, out)
            chain, why = self.chain(content)
            acl = document_acl(self.site, space_key, self._anonymous(space_key, out.problems), chain)
            space_name = (content.get("space") or {}).get("name")
            built = content_to_document(content, self.site, acl, comments, space_name, self.base_url)
        except ConfluenceAccessError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            out.problems.append(RecordProblem(_where(content), f"{type(exc).__name__}: {exc}"))
            return None
        if chain is None:
            out.problems.append(
                RecordProblem(_where(content), f"{why}; indexed readable by nobody (fail closed), read again next time")
            )
        out.problems.extend(built.problems)
        return built.document

    def _comments(self, content: dict[str, Any], out: SpaceRead) -> list[dict[str, Any]]:
        """Every comment of a page (replies included), paged; skipped for a page whose expansion shows none."""
        embedded = (content.get("children") or {}).get("comment")
        if (
            isinstance(embedded, dict)
            and not embedded.get("results")
            and not (embedded.get("_links") or {}).get("next")
        ):
            return []
        page_id = content_id(content)
        size = self.settings.comment_page_size

        def first() -> Any:
            return self.client.get_page_comments(page_id, expand=COMMENT_EXPAND, start=0, limit=size, depth="all")

        comments = []
        for comment in self.paged("read comments", f"page {page_id}", "content/{id}/child/comment", first):
            comments.append(comment)
        out.comment_pages += max(1, -(-len(comments) // size))
        return comments

    def restriction(self, content_id_: str) -> ReadRestriction:
        """The read restriction of one page (``restriction/byOperation``), cached per reader; ValueError or
        ConfluenceAccessError when it cannot be read."""
        if content_id_ in self._restrictions:
            return self._restrictions[content_id_]
        found = self._call("read restrictions", f"page {content_id_}", self.client.get_all_restrictions_for_content,
                           content_id_)  # fmt: skip
        restriction = read_restriction(content_id_, (found or {}).get("read"))
        self._restrictions[content_id_] = restriction
        return restriction

    def chain(self, content: dict[str, Any]) -> tuple[list[ReadRestriction] | None, str]:
        """The read restrictions from the space root down to ``content`` (root first), or (None, why) when one
        cannot be read: the page's own from its expansion (or the endpoint when the expansion is missing or
        truncated), each ancestor's from the endpoint. An access error on an ancestor fails the page closed,
        not the read."""
        page_id = content_id(content)
        chain: list[ReadRestriction] = []
        ancestors = content.get("ancestors") if content.get("type") == "page" else []
        for ancestor in ancestors or []:
            ancestor_id = content_id(ancestor)
            try:
                chain.append(self.restriction(ancestor_id))
            except (ConfluenceAccessError, ValueError) as exc:
                return None, f"the read restrictions of ancestor {ancestor_id} cannot be read ({exc})"
        try:
            own = read_restriction(page_id, ((content.get("restrictions") or {}).get("read")))
            self._restrictions[page_id] = own
        except ValueError:
            try:
                own = self.restriction(page_id)
            except (ConfluenceAccessError, ValueError) as exc:
                return None, f"the read restrictions of page {page_id} cannot be read ({exc})"
        chain.append(own)
        return chain, ""

    def page_document(self, page_id: str) -> Document | None:
        """The current document of one page or blog post by id (None when it is gone: 404, trashed, deleted).
        A page whose restrictions cannot be read is a ConfluenceAccessError: reconciliation fails the space and
        tries again rather than rewrite the page with an ACL it cannot know."""
        content = self._call("read a page", f"page {page_id}", self.client.get_page_by_id, page_id,
                             expand=PAGE_EXPAND, missing_ok=True)  # fmt: skip
        if not isinstance(content, dict) or content.get("status", "current") != "current":
            return None
        out = SpaceRead()
        chain, why = self.chain(content)
        if chain is None:
            raise ConfluenceAccessError(why)
        doc = self._document(content, out)
        if doc is None:
            raise ConfluenceAccessError(str(out.problems[0]) if out.problems else f"page {page_id} unreadable")
        return doc

    def page_ids(self, space_key: str) -> dict[str, ListedPage]:
        """Every page and blog post the space holds now, with ancestors and own read restriction (large pages of
        ids), for reconciliation and the directory's restricted chains."""
        cql = f'space = "{space_key}" and type in (page, blogpost) order by created asc'
        listed: dict[str, ListedPage] = {}
        with self._budgeted(space_key, 1):
            for content in self.search(cql, LISTING_EXPAND, self.settings.id_page_size, f"space {space_key}"):
                try:
                    page_id = content_id(content)
                except ValueError:
                    continue
                ancestors = tuple(
                    str(a.get("id")) for a in content.get("ancestors") or [] if isinstance(a, dict) and a.get("id")
                )
                try:
                    restriction: ReadRestriction | None = read_restriction(
                        page_id, (content.get("restrictions") or {}).get("read")
                    )
                except ValueError:
                    restriction = None
                listed[page_id] = ListedPage(page_id, space_key, ancestors, restriction)
        return listed

    def listing_chain(self, listed: dict[str, ListedPage], page_id: str) -> list[ReadRestriction] | None:
        """A listed page's chain from the listing alone (None when a level's restriction is unknown there)."""
        page = listed.get(page_id)
        if page is None:
            return None
        chain = []
        for level_id in (*page.ancestors, page_id):
            level = listed.get(level_id)
            if level is None or level.restriction is None:
                return None
            chain.append(level.restriction)
        return chain

    def listing_acl(self, listed: dict[str, ListedPage], page_id: str, space_key: str) -> Acl | None:
        """The ACL a listed page should carry now, or None when the listing cannot say."""
        chain = self.listing_chain(listed, page_id)
        if chain is None:
            return None
        return document_acl(self.site, space_key, self.space_grants(space_key).anonymous, chain)

    # --- directory ---------------------------------------------------------------------------------------
    def group_members(self, group: str) -> list[dict[str, Any]]:
        """Every member of a Confluence group (``group/{name}/member``), paged."""
        size = self.settings.member_page_size

        def first() -> Any:
            return self.client.get_group_members(group, start=0, limit=size, expand="status")

        return list(self.paged("list group members", f"group {group}", "group/{name}/member", first))


def _where(content: dict[str, Any]) -> str:
    return f"confluence page {content.get('id', '?')} ({str(content.get('title', ''))[:60]})"
