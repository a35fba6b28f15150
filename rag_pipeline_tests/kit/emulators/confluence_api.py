"""A small, stdlib-only emulator of the Confluence REST API v1 (Cloud under ``/wiki`` or Data Center) for tests.

It serves a mutable in-memory :class:`ConfluenceSite` on ``http://127.0.0.1:<port><context>`` so the real
``atlassian.Confluence`` client (atlassian-python-api 5.x, REST v1 class) can be pointed at it with
``url=emulator.url``. What it reproduces, as the connector's reader calls it:

* ``space`` (``start``/``limit``/``status``/``type``; ``_links.next`` while more remain) and ``space/{key}``
  (``expand=permissions``: REST v1 space permission objects, one per subject, ``anonymousAccess`` on its own);
* ``content/search`` by CQL, paged (``start``/``limit`` with ``_links.next``; Cloud mode hands out opaque
  ``cursor`` links instead), ``limit`` capped at ``search_limit_cap``. Only the forms the reader sends are parsed:
  ``space = "K" and type in (page, blogpost)`` with an optional ``lastModified >= "yyyy/MM/dd HH:mm" and
  lastModified < "…"`` window and ``order by created asc``; anything else is a 400. CQL dates are read in the
  site user's zone (:attr:`ConfluenceSite.time_zone`) with minute precision;
* ``content/{id}`` with expansions (``body.storage``, ``ancestors``, ``space``, ``version``, ``history``,
  ``metadata.labels``, ``children.comment``, ``restrictions.read.restrictions.user|group``: each part only when
  asked for); trashed and deleted pages are 404s and never found by search;
* ``content/{id}/child/comment`` (paged, ``depth=all`` includes replies), ``content/{id}/restriction/byOperation``
  and ``…/byOperation/read``, ``group/{name}/member`` (paged), ``user/current`` (with ``timeZone``);
* auth: HTTP Basic ``username:api_token`` or ``Bearer <pat>`` (Data Center mode only); else 401;
* faults: :meth:`ConfluenceEmulator.inject` ``"429"`` (with ``Retry-After``), ``"500"``/``"503"``, ``"403"``/
  ``"404"``, ``"drop"``, for requests whose path contains ``path``; every request is recorded
  (:attr:`ConfluenceEmulator.requests`).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit
from zoneinfo import ZoneInfo

from rag_pipeline_tests.kit.emulators.http import LocalHttpService, atlassian_caller, send_json

FAULT_KINDS = frozenset({"429", "500", "503", "403", "404", "drop"})
_CQL_SPACE = r'space\s*=\s*"(?P<space>[^"]+)"\s+and\s+type\s+in\s*\(\s*page\s*,\s*blogpost\s*\)'
_CQL_WINDOW = r'\s+and\s+lastModified\s*>=\s*"(?P<start>[^"]+)"\s+and\s+lastModified\s*<\s*"(?P<end>[^"]+)"'
_CQL = re.compile(rf"{_CQL_SPACE}(?:{_CQL_WINDOW})?(?:\s+order\s+by\s+created\s+asc)?\s*", re.I)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass
class User:
    account_id: str
    display_name: str
    email: str | None = None
    groups: list[str] = field(default_factory=list)
    active: bool = True


@dataclass
class Space:
    key: str
    name: str
    view_groups: list[str] = field(default_factory=list)
    view_users: list[str] = field(default_factory=list)
    anonymous: bool = False
    type: str = "global"
    status: str = "current"


@dataclass
class Content:
    id: str
    space: str
    title: str
    body: str
    modified: datetime
    created: datetime
    author: str
    parent: str | None = None
    type: str = "page"
    version: int = 1
    labels: list[str] = field(default_factory=list)
    read_users: list[str] = field(default_factory=list)
    read_groups: list[str] = field(default_factory=list)
    status: str = "current"


@dataclass
class Comment:
    id: str
    container: str
    body: str
    author: str
    created: datetime
    location: str = "footer"
    selection: str | None = None
    parent: str | None = None


class ConfluenceSite:
    """Users, groups, spaces, pages (a tree by ``parent``), blog posts, comments and restrictions."""

    def __init__(self, time_zone: str = "UTC") -> None:
        self.time_zone = time_zone
        self.users: dict[str, User] = {}
        self.spaces: dict[str, Space] = {}
        self.contents: dict[str, Content] = {}
        self.comments: dict[str, Comment] = {}
        self.lock = threading.RLock()
        self._next_id = 1000

    def new_id(self) -> str:
        self._next_id += 1
        return str(self._next_id)

    def add_user(self, account_id: str, name: str, email: str | None = None, groups: list[str] | None = None) -> User:
        user = User(account_id, name, email, list(groups or []))
        self.users[account_id] = user
        return user

    def add_space(self, key: str, name: str | None = None, **kwargs: Any) -> Space:
        space = Space(key, name or key, **kwargs)
        self.spaces[key] = space
        return space

    def add_page(
        self, space: str, title: str, body: str, modified: datetime, author: str = "acc-alice", **kwargs: Any
    ) -> Content:
        created = kwargs.pop("created", modified)
        page = Content(kwargs.pop("id", None) or self.new_id(), space, title, body, modified, created, author,
                       **kwargs)  # fmt: skip
        self.contents[page.id] = page
        return page

    def add_comment(self, page: str, body: str, author: str, created: datetime, **kwargs: Any) -> Comment:
        comment = Comment(self.new_id(), page, body, author, created, **kwargs)
        self.comments[comment.id] = comment
        return comment

    def members(self, group: str) -> list[User]:
        return sorted((u for u in self.users.values() if group in u.groups), key=lambda u: u.account_id)

    def ancestors(self, content: Content) -> list[Content]:
        chain: list[Content] = []
        parent = content.parent
        while parent is not None and parent in self.contents:
            chain.insert(0, self.contents[parent])
            parent = self.contents[parent].parent
        return chain


@dataclass
class RecordedRequest:
    method: str
    path: str
    params: dict[str, str]
    status: int
    auth: str


@dataclass
class _Fault:
    kind: str
    path: str | None
    remaining: int
    retry_after: float


class _ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class ConfluenceEmulator(LocalHttpService):
    """Serves a :class:`ConfluenceSite` as Confluence Cloud (``cloud=True``: ``/wiki`` context, cursor links) or
    Data Center (no context path, start/limit links, PATs)."""

    thread_name = "confluence-emulator"
    server_name = "ConfluenceEmulator/1.0"

    def __init__(
        self,
        site: ConfluenceSite,
        *,
        cloud: bool = True,
        username: str = "bot@example.com",
        api_token: str = "confluence-test-token",
        personal_access_token: str = "confluence-test-pat",
        search_limit_cap: int = 50,
    ) -> None:
        self.site = site
        self.cloud = cloud
        self.context = "/wiki" if cloud else ""
        self.username, self.api_token, self.personal_access_token = username, api_token, personal_access_token
        self.search_limit_cap = search_limit_cap
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        super().__init__()
        self._routes: list[tuple[re.Pattern[str], Callable[..., Any]]] = [
            (re.compile(r"space"), self._spaces),
            (re.compile(r"space/([^/]+)"), self._space),
            (re.compile(r"content/search"), self._search),
            (re.compile(r"content/([^/]+)"), self._content),
            (re.compile(r"content/([^/]+)/child/comment"), self._comments),
            (re.compile(r"content/([^/]+)/restriction/byOperation"), self._restrictions),
            (re.compile(r"content/([^/]+)/restriction/byOperation/read"), self._read_restriction),
            (re.compile(r"group/([^/]+)/member"), self._group_members),
            (re.compile(r"user/current"), self._current_user),
        ]

    @property
    def url(self) -> str:
        """The site URL a client is given (``http://127.0.0.1:PORT/wiki`` in Cloud mode)."""
        return self.origin + self.context

    # -- faults and recording --------------------------------------------------------------------------------------
    def inject(self, kind: str, *, path: str | None = None, times: int = 1, retry_after: float = 0) -> None:
        """Make the next ``times`` requests whose path contains ``path`` fail with ``kind``."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
        with self._lock:
            self._faults.append(_Fault(kind, path, times, retry_after))

    def calls(self, path_part: str = "") -> list[RecordedRequest]:
        """Recorded requests whose path contains ``path_part``, faults included, in arrival order."""
        with self._lock:
            return [r for r in self.requests if path_part in r.path]

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()

    def _take_fault(self, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.path is None or fault.path in path:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    # -- HTTP ------------------------------------------------------------------------------------------------------
    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        split = urlsplit(request.path)
        path = unquote(split.path)
        params = {k: ",".join(v) for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        auth, authorized = self._authenticate(request.headers.get("Authorization"))
        record = RecordedRequest(request.command, path, params, 0, auth)
        with self._lock:
            self.requests.append(record)
        fault = self._take_fault(path)
        if fault is not None:
            if fault.kind == "drop":
                request.close_connection = True
                return
            headers = {"Retry-After": str(math.ceil(fault.retry_after))} if fault.kind == "429" else {}
            self._send(request, record, int(fault.kind), {"message": f"injected {fault.kind}"}, headers)
            return
        if not authorized:
            self._send(request, record, 401, {"message": "Unauthorized"})
            return
        try:
            with self.site.lock:
                body = self._dispatch(path, params)
        except _ApiError as error:
            self._send(request, record, error.status, {"statusCode": error.status, "message": str(error)},
                       error.headers)  # fmt: skip
            return
        except Exception:
            self.errors.append(traceback.format_exc())
            self._send(request, record, 500, {"message": "Internal emulator error"})
            return
        self._send(request, record, 200, body)

    @staticmethod
    def _send(
        request: BaseHTTPRequestHandler,
        record: RecordedRequest,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        record.status = status
        send_json(request, status, body, headers=headers)

    def _authenticate(self, header: str | None) -> tuple[str, bool]:
        return atlassian_caller(header, self.username, self.api_token, self.personal_access_token, self.cloud)

    def _dispatch(self, path: str, params: dict[str, str]) -> Any:
        prefix = f"{self.context}/rest/api/"
        if not path.startswith(prefix):
            raise _ApiError(404, f"No resource found for {path}")
        resource = path[len(prefix) :].rstrip("/")
        for pattern, handler in self._routes:
            match = pattern.fullmatch(resource)
            if match is not None:
                return handler(params, *match.groups())
        raise _ApiError(404, f"No resource found for {path}")

    # -- helpers ---------------------------------------------------------------------------------------------------
    @staticmethod
    def _int(params: dict[str, str], name: str, default: int) -> int:
        raw = params.get(name)
        try:
            return int(raw) if raw not in (None, "") else default
        except ValueError:
            raise _ApiError(400, f"'{name}' must be an integer") from None

    def _page(self, items: list[Any], params: dict[str, str], resource: str, cap: int) -> dict[str, Any]:
        """One start/limit page of ``items`` with ``_links.next`` (relative to the context) while more remain."""
        if self.cloud and params.get("cursor"):
            try:
                start = int(base64.b64decode(params["cursor"]).decode())
            except (binascii.Error, ValueError, UnicodeDecodeError):
                raise _ApiError(400, "Invalid cursor") from None
        else:
            start = self._int(params, "start", 0)
        limit = min(self._int(params, "limit", 25) or 25, cap)
        page = items[start : start + limit]
        links: dict[str, str] = {"base": self.origin + self.context, "context": self.context}
        if start + len(page) < len(items):
            rest = {k: v for k, v in params.items() if k not in ("start", "cursor", "limit")}
            if self.cloud:
                cursor = base64.b64encode(str(start + len(page)).encode()).decode()
                query = urlencode({**rest, "next": "true", "cursor": cursor, "limit": limit}, quote_via=quote)
            else:
                query = urlencode({**rest, "start": start + len(page), "limit": limit}, quote_via=quote)
            links["next"] = f"/rest/api/{resource}?{query}"
        return {"results": page, "start": start, "limit": limit, "size": len(page), "_links": links}

    def _user(self, account_id: str) -> dict[str, Any]:
        user = self.site.users.get(account_id)
        found: dict[str, Any] = {"type": "known", "displayName": user.display_name if user else account_id}
        if self.cloud:
            found["accountId"] = account_id
            if user is not None and user.email:
                found["email"] = user.email
        else:
            found["username"] = account_id
            found["userKey"] = f"key-{account_id}"
        return found

    def _restriction(self, content: Content) -> dict[str, Any]:
        users = [self._user(u) for u in content.read_users]
        groups = [{"type": "group", "name": g} for g in content.read_groups]
        return {
            "operation": "read",
            "restrictions": {
                "user": {"results": users, "start": 0, "limit": 200, "size": len(users)},
                "group": {"results": groups, "start": 0, "limit": 200, "size": len(groups)},
            },
        }

    def _content_object(self, content: Content, expand: str) -> dict[str, Any]:
        parts = {p.strip() for p in expand.split(",") if p.strip()}

        def wants(name: str) -> bool:
            return any(p == name or p.startswith(name + ".") for p in parts)

        space = self.site.spaces[content.space]
        obj: dict[str, Any] = {
            "id": content.id,
            "type": content.type,
            "status": content.status,
            "title": content.title,
            "_links": {
                "webui": f"/spaces/{content.space}/pages/{content.id}",
                "base": self.origin + self.context,
                "self": f"{self.origin}{self.context}/rest/api/content/{content.id}",
            },
        }
        if wants("body.storage"):
            obj["body"] = {"storage": {"value": content.body, "representation": "storage"}}
        if wants("ancestors"):
            obj["ancestors"] = [
                {"id": a.id, "type": a.type, "title": a.title, "status": a.status}
                for a in (self.site.ancestors(content) if content.type == "page" else [])
            ]
        if wants("space"):
            obj["space"] = {"key": space.key, "name": space.name, "type": space.type}
        if wants("version"):
            obj["version"] = {
                "number": content.version,
                "when": iso(content.modified),
                "by": self._user(content.author),
            }
        if wants("history"):
            obj["history"] = {"createdDate": iso(content.created), "createdBy": self._user(content.author)}
        if wants("metadata.labels"):
            labels = [{"prefix": "global", "name": n} for n in content.labels]
            obj["metadata"] = {"labels": {"results": labels, "size": len(labels)}}
        if wants("children.comment"):
            found = [{"id": c.id, "type": "comment"} for c in self._comment_list(content.id, top_only=True)][:25]
            obj["children"] = {"comment": {"results": found, "size": len(found), "_links": {}}}
        if wants("restrictions.read"):
            obj["restrictions"] = {"read": self._restriction(content)}
        return obj

    def _visible(self, content_id: str) -> Content:
        content = self.site.contents.get(content_id)
        if content is None or content.status != "current":
            raise _ApiError(404, f"No content found with id: ContentId{{id={content_id}}}")
        return content

    def _comment_list(self, page_id: str, top_only: bool = False) -> list[Comment]:
        found = [c for c in self.site.comments.values() if c.container == page_id and not (top_only and c.parent)]
        return sorted(found, key=lambda c: (c.created, c.id))

    def _cql_time(self, text: str) -> datetime:
        try:
            wall = datetime.strptime(text, "%Y/%m/%d %H:%M")
        except ValueError:
            raise _ApiError(400, f"Could not parse date: {text}") from None
        return wall.replace(tzinfo=ZoneInfo(self.site.time_zone))

    # -- endpoints -------------------------------------------------------------------------------------------------
    def _spaces(self, params: dict[str, str]) -> dict[str, Any]:
        status, kind = params.get("status"), params.get("type")
        spaces = [
            {"id": n, "key": s.key, "name": s.name, "type": s.type, "status": s.status}
            for n, s in enumerate(sorted(self.site.spaces.values(), key=lambda s: s.key), start=1)
            if (not status or s.status == status) and (not kind or s.type == kind)
        ]
        return self._page(spaces, params, "space", 100)

    def _space(self, params: dict[str, str], key: str) -> dict[str, Any]:
        space = self.site.spaces.get(key)
        if space is None:
            raise _ApiError(404, f"No space with key : {key}")
        found: dict[str, Any] = {"key": space.key, "name": space.name, "type": space.type, "status": space.status}
        if "permissions" in params.get("expand", ""):
            read = {"operation": "read", "targetType": "space"}
            permissions: list[dict[str, Any]] = [
                {"operation": read, "subjects": {"group": {"results": [{"type": "group", "name": g}], "size": 1}},
                 "anonymousAccess": False, "unlicensedAccess": False}
                for g in space.view_groups
            ]  # fmt: skip
            permissions += [
                {"operation": read, "subjects": {"user": {"results": [self._user(u)], "size": 1}},
                 "anonymousAccess": False, "unlicensedAccess": False}
                for u in space.view_users
            ]  # fmt: skip
            # Other operations are listed too, and must not count as view.
            permissions.append({"operation": {"operation": "administer", "targetType": "space"},
                                "subjects": {"user": {"results": [self._user("acc-admin")], "size": 1}},
                                "anonymousAccess": False})  # fmt: skip
            if space.anonymous:
                permissions.append({"operation": read, "anonymousAccess": True, "unlicensedAccess": False})
            found["permissions"] = permissions
        return found

    def _search(self, params: dict[str, str]) -> dict[str, Any]:
        cql = params.get("cql") or ""
        match = _CQL.fullmatch(cql.strip())
        if match is None:
            raise _ApiError(400, f"Could not parse cql : {cql}")
        start = self._cql_time(match["start"]) if match["start"] else None
        end = self._cql_time(match["end"]) if match["end"] else None
        found = []
        for content in self.site.contents.values():
            if content.space != match["space"] or content.status != "current":
                continue
            # CQL compares with minute precision: a modification is in [start, end) by its minute.
            minute = content.modified.replace(second=0, microsecond=0)
            if (start is not None and minute < start) or (end is not None and minute >= end):
                continue
            found.append(content)
        found.sort(key=lambda c: (c.created, int(c.id) if c.id.isdigit() else 0, c.id))
        expand = params.get("expand", "")
        cap = self.search_limit_cap if "body" in expand else 1000
        page = self._page([c.id for c in found], params, "content/search", cap)
        page["results"] = [self._content_object(self.site.contents[i], expand) for i in page["results"]]
        return page

    def _content(self, params: dict[str, str], content_id: str) -> dict[str, Any]:
        return self._content_object(self._visible(content_id), params.get("expand", "history,space,version"))

    def _comments(self, params: dict[str, str], content_id: str) -> dict[str, Any]:
        self._visible(content_id)
        comments = self._comment_list(content_id, top_only=params.get("depth") != "all")
        page = self._page([c.id for c in comments], params, f"content/{content_id}/child/comment", 100)
        page["results"] = [self._comment_object(self.site.comments[i]) for i in page["results"]]
        return page

    def _comment_object(self, comment: Comment) -> dict[str, Any]:
        extensions: dict[str, Any] = {"location": comment.location}
        if comment.location == "inline":
            extensions["inlineProperties"] = {"originalSelection": comment.selection or ""}
        return {
            "id": comment.id,
            "type": "comment",
            "status": "current",
            "title": "Re: comment",
            "container": {"id": comment.container, "type": "page"},
            "body": {"storage": {"value": comment.body, "representation": "storage"}},
            "history": {"createdDate": iso(comment.created), "createdBy": self._user(comment.author)},
            "version": {"number": 1, "when": iso(comment.created), "by": self._user(comment.author)},
            "extensions": extensions,
        }

    def _restrictions(self, params: dict[str, str], content_id: str) -> dict[str, Any]:
        content = self._visible(content_id)
        empty = {"user": {"results": [], "size": 0}, "group": {"results": [], "size": 0}}
        return {"read": self._restriction(content), "update": {"operation": "update", "restrictions": empty}}

    def _read_restriction(self, params: dict[str, str], content_id: str) -> dict[str, Any]:
        return self._restriction(self._visible(content_id))

    def _group_members(self, params: dict[str, str], group: str) -> dict[str, Any]:
        members = self.site.members(group)
        if not members and not any(group in s.view_groups for s in self.site.spaces.values()):
            known = {g for u in self.site.users.values() for g in u.groups}
            known |= {g for c in self.site.contents.values() for g in c.read_groups}
            if group not in known:
                raise _ApiError(404, f"No group found with name : {group}")
        objects = []
        for user in members:
            obj = self._user(user.account_id)
            obj["status"] = "current" if user.active else "deactivated"
            objects.append(obj)
        return self._page(objects, params, f"group/{quote(group)}/member", 50)

    def _current_user(self, params: dict[str, str]) -> dict[str, Any]:
        found = self._user("acc-bot")
        found["timeZone"] = self.site.time_zone
        return found


def at(day: str, hour: int = 12, minute: int = 0) -> datetime:
    """A UTC instant on ``day`` (YYYY-MM-DD), for fixtures."""
    return datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(hours=hour, minutes=minute)


def dump_lines(emulator: ConfluenceEmulator, expand: str) -> list[str]:
    """The site as dump lines (pages, comments and space records), as the live API would have returned them."""
    site = emulator.site
    lines = []
    for space in site.spaces.values():
        permissions = emulator._space({"expand": "permissions"}, space.key)["permissions"]
        lines.append(json.dumps({"type": "space", "key": space.key, "name": space.name, "permissions": permissions,
                                 "anonymous": space.anonymous}))  # fmt: skip
    for content in site.contents.values():
        lines.append(json.dumps(emulator._content_object(content, expand) | {"status": content.status}))
    for comment in site.comments.values():
        lines.append(json.dumps(emulator._comment_object(comment)))
    return lines
