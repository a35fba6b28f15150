"""A small, stdlib-only emulator of the Jira REST API (Cloud or Server/Data Center) for tests and benchmarks.

It serves the endpoints a Jira ETL calls from a mutable in-memory
:class:`~rag_pipeline_tests.kit.emulators.jira_site.JiraSite` on ``http://127.0.0.1:<port>``, so the real
``atlassian.Jira`` client (atlassian-python-api 5.x) can be pointed at it with ``url=emulator.url``.

What it reproduces (request paths and shapes of the real REST API as atlassian-python-api sees them):

* ``/rest/api/2`` and ``/rest/api/3`` (``latest`` = 2): v2 serves wiki-text bodies, v3 serves Atlassian Document
  Format (:func:`~rag_pipeline_tests.kit.emulators.jira_site.body_for_version` converts either way). Server mode has
  no v3.
* Auth: HTTP Basic ``username:api_token`` (Cloud and Server) or ``Bearer <personal access token>`` (Server only);
  anything else is a ``text/plain`` 401 (atlassian raises ``HTTPError("Unauthorized (401)")``).
* Search. Cloud: ``GET|POST search/jql`` with opaque ``nextPageToken`` paging, ``isLast`` and no ``total``; only
  ``id`` unless ``fields`` is given; ``maxResults`` capped at 100 (5000 for id/key-only requests); unbounded JQL
  (no restriction) is rejected; the old ``search`` endpoint answers **410 Gone** (CHANGE-2046). Server:
  ``GET|POST search`` with ``startAt``/``maxResults``/``total``.
* A JQL subset, parsed properly (:mod:`rag_pipeline_tests.kit.emulators.jql`): ``project``, ``updated``/``created``,
  ``id``, ``key`` clauses joined by ``AND`` and ``ORDER BY``. Dates are read in the **site user's timezone** with
  **minute** precision, like Jira, and compared with the issues' exact ``updated``/``created`` instants. Unknown or
  invisible projects and unknown keys are 400s, like Jira.
* Issues: ``security`` null for an issue without a level, fields hidden from the API user left out
  (:meth:`~rag_pipeline_tests.kit.emulators.jira_site.JiraSite.hide_fields`),
  embedded comments truncated to ``embed_comments`` in search results (``GET issue`` embeds them all),
  ``issue/{key}/comment`` paging, moved issues resolving by their old key, deleted issues 404.
* Projects: Cloud ``project/search`` pages with an absolute ``nextPage`` URL; Server ``project`` is one list;
  archived projects only with ``status=archived`` (Cloud
  ``project/search``) or ``includeArchived`` (``project``); permission schemes (``BROWSE_PROJECTS`` grants to groups and
  project roles) and role actors.
* The directory (served on v2 and v3, Cloud and Server alike): ``group/member`` (``groupname`` or ``groupId``;
  inactive users only with ``includeInactiveUsers=true``; ``emailAddress`` only where the user has one),
  ``group/bulk`` (groups by name, with their ``groupId``), ``groups/picker`` (case-insensitive substring match, with
  the picker's ``header`` and ``html``), ``issuesecurityschemes`` and ``issuesecurityschemes/{id}`` (the site's one
  scheme and its levels) and ``issuesecurityschemes/level/member`` (group and user holders per level). The paged ones
  answer ``startAt``/``maxResults``/``total``/``isLast``/``values`` with ``maxResults`` capped at
  ``directory_page_cap`` (50, as Cloud).
* Fault injection: HTTP 429 with ``Retry-After``, 500/503, 401/403/404, dropped connections, a server that never
  answers (``silent``) and one that answers one byte per second (``trickle``); broken paging per project
  (:meth:`JiraEmulator.break_paging`: a repeated ``nextPageToken``, an ignored ``startAt``, endless empty pages;
  :meth:`JiraEmulator.break_value_paging`: empty ``values`` pages of the directory that promise more);
  every request is recorded (:attr:`JiraEmulator.requests`).

Usage::

    with JiraEmulator(crafted_site()) as emulator:
        jira = Jira(url=emulator.url, username="bot@example.com", password="jira-test-token", cloud=True,
                    api_version="3")
        emulator.inject("429", path="/search/jql")
        page = jira.enhanced_jql("project = OPS ORDER BY updated ASC", fields="summary,updated", limit=10)
        assert [r.status for r in emulator.calls("/rest/api/3/search/jql")] == [429, 200]
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import math
import re
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from rag_pipeline_tests.kit.emulators.http import LocalHttpService, atlassian_caller, send
from rag_pipeline_tests.kit.emulators.jira_site import (
    SECURITY_SCHEME_ID,
    SECURITY_SCHEME_NAME,
    JiraProject,
    JiraSite,
    group_id,
    sorted_comments,
)
from rag_pipeline_tests.kit.emulators.jql import JqlError, compile_jql, sort_issues

__all__ = [
    "FAULT_KINDS",
    "GONE_MESSAGE",
    "ISSUE_NOT_FOUND_MESSAGE",
    "JSON_CONTENT_TYPE",
    "UNBOUNDED_JQL_MESSAGE",
    "JiraEmulator",
    "RecordedRequest",
]

FAULT_KINDS = frozenset({"429", "500", "503", "drop", "401", "403", "404", "silent", "trickle"})
# How search paging can break (break_paging): a cursor bug or a caching proxy handing out one token forever, a
# Server/DC that ignores startAt, or pages that stay empty yet promise more.
PAGING_FAULTS = frozenset({"repeat_token", "ignore_start", "empty_pages"})
TRICKLE_SECONDS_PER_BYTE = 1.0
JSON_CONTENT_TYPE = "application/json;charset=UTF-8"
GONE_MESSAGE = (
    "The requested API has been removed. Please migrate to the /rest/api/3/search/jql API. "
    "A full migration guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046"
)
ISSUE_NOT_FOUND_MESSAGE = "Issue does not exist or you do not have permission to see it."
UNBOUNDED_JQL_MESSAGE = "Unbounded JQL queries are not allowed here. Please add a search restriction to your query."
_FAULT_MESSAGES = {
    "401": "You are not authenticated. Authentication required to perform this operation.",
    "403": "You do not have permission to perform this operation.",
    "404": "The requested resource could not be found.",
    "500": "Internal server error.",
    "503": "Service unavailable. Please try again later.",
    "429": "Rate limit exceeded.",
}
# Fields that "*navigable" (the Server search default) leaves out.
_NON_NAVIGABLE = frozenset({"comment", "worklog"})


@dataclass
class RecordedRequest:
    """One request as the emulator saw it."""

    method: str  # HTTP method
    path: str  # URL path without the query string
    params: dict[str, str]  # query string and JSON body keys (single values as strings; lists comma-joined)
    status: int  # HTTP status sent, or 0 for a dropped connection
    auth: str  # "basic:<user>", "bearer" or "none" (as presented, valid or not)


@dataclass
class _Fault:
    kind: str
    path: str | None
    remaining: int
    retry_after: float
    match: str | None = None


class _ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"errorMessages": [message], "errors": {}}
        self.headers = headers or {}


@dataclass
class _Call:
    method: str
    version: int
    path: str
    params: dict[str, str]


class _FieldSelection:
    """A ``fields`` parameter: ``*all``, ``*navigable``, names, ``-name`` exclusions."""

    def __init__(self, spec: str | None, default: str) -> None:
        tokens = [t.strip() for t in (spec if spec is not None else default).split(",") if t.strip()]
        self.all = "*all" in tokens
        self.navigable = "*navigable" in tokens
        self.explicit = {t for t in tokens if not t.startswith(("*", "-"))}
        self.excluded = {t[1:] for t in tokens if t.startswith("-")}
        self.id_only = not self.all and not self.navigable and self.explicit <= {"id", "key"}

    def __call__(self, name: str) -> bool:
        if name in self.excluded:
            return False
        return self.all or (self.navigable and name not in _NON_NAVIGABLE) or name in self.explicit


class JiraEmulator(LocalHttpService):
    """Serves a :class:`JiraSite` over HTTP on 127.0.0.1 (a free port) as Jira Cloud (``cloud=True``) or Jira
    Server/Data Center REST."""

    def __init__(
        self,
        site: JiraSite,
        *,
        cloud: bool = True,
        username: str = "bot@example.com",
        api_token: str = "jira-test-token",
        personal_access_token: str = "jira-test-pat",
        embed_comments: int = 20,
        max_results_cap: int = 100,
        id_only_max_results_cap: int = 5000,
        comment_page_cap: int = 100,
        project_page_size: int = 50,
        directory_page_cap: int = 50,
        group_picker_cap: int = 1000,
    ) -> None:
        self.site = site
        self.cloud = cloud
        self.username = username
        self.api_token = api_token
        self.personal_access_token = personal_access_token
        self.embed_comments = embed_comments
        self.max_results_cap = max_results_cap
        self.id_only_max_results_cap = id_only_max_results_cap
        self.comment_page_cap = comment_page_cap
        self.project_page_size = project_page_size
        self.directory_page_cap = directory_page_cap
        self.group_picker_cap = group_picker_cap
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []  # tracebacks of handler crashes (answered 500)
        self._faults: list[_Fault] = []
        self._paging_faults: dict[str | None, str] = {}
        # Path parts whose `values` pages come back empty while promising more (break_value_paging).
        self._empty_value_pages: set[str] = set()
        # Set on stop, so a silent or trickling handler ends with the emulator instead of holding its thread.
        self._stopping = threading.Event()
        self._record_lock = threading.Lock()
        super().__init__()
        get, post, both = ("GET",), ("POST",), ("GET", "POST")
        self._routes: list[tuple[re.Pattern[str], tuple[str, ...], Callable[..., Any]]] = [
            (re.compile(r"myself"), get, self._myself),
            (re.compile(r"serverInfo"), get, self._server_info),
            (re.compile(r"project"), get, self._project_list),
            (re.compile(r"project/search"), get, self._project_search),
            (re.compile(r"project/([^/]+)"), get, self._project_get),
            (re.compile(r"project/([^/]+)/permissionscheme"), get, self._permission_scheme),
            (re.compile(r"project/([^/]+)/role"), get, self._project_roles),
            (re.compile(r"project/([^/]+)/role/([^/]+)"), get, self._project_role),
            (re.compile(r"search"), both, self._search_old),
            (re.compile(r"search/jql"), both, self._search_jql),
            (re.compile(r"search/approximate-count"), post, self._approximate_count),
            (re.compile(r"issue/([^/]+)"), get, self._issue_get),
            (re.compile(r"issue/([^/]+)/comment"), get, self._comments),
            (re.compile(r"issue/([^/]+)/comment/([^/]+)"), get, self._comment_get),
            (re.compile(r"group/member"), get, self._group_member),
            (re.compile(r"group/bulk"), get, self._group_bulk),
            (re.compile(r"groups/picker"), get, self._groups_picker),
            (re.compile(r"issuesecurityschemes"), get, self._security_schemes),
            # Before the scheme route, though "([^/]+)" cannot take "level/member" anyway (routes are fullmatched).
            (re.compile(r"issuesecurityschemes/level/member"), get, self._security_level_members),
            (re.compile(r"issuesecurityschemes/([^/]+)"), get, self._security_scheme),
        ]

    # -- lifecycle ------------------------------------------------------------------------------------------------

    thread_name = "jira-emulator"
    server_name = "JiraEmulator/1.0"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (only once started)."""
        return self.origin

    # -- faults and recording -------------------------------------------------------------------------------------

    def start(self) -> None:
        self._stopping.clear()
        super().start()

    def stop(self) -> None:
        self._stopping.set()
        super().stop()

    def break_paging(self, mode: str, project: str | None = None) -> None:
        """Break search paging for ``project``'s queries (every query when None) until :meth:`clear_faults`:
        ``"repeat_token"`` (Cloud: every page hands out the same ``nextPageToken`` with ``isLast: false``),
        ``"ignore_start"`` (Server: every page is the first, ``startAt: 0``), ``"empty_pages"`` (no issues, and
        more promised: a fresh token with ``isLast: false``, or ``total`` beyond ``startAt``)."""
        if mode not in PAGING_FAULTS:
            raise ValueError(f"unknown paging fault {mode!r}; expected one of {sorted(PAGING_FAULTS)}")
        with self._record_lock:
            self._paging_faults[project] = mode

    def break_value_paging(self, path: str) -> None:
        """Until :meth:`clear_faults`, every ``values`` page (``group/member``, ``group/bulk``, security level
        members) whose path contains ``path`` comes back empty while promising more: ``isLast: false`` and the
        real ``total``, as a server that loses its pages would answer."""
        with self._record_lock:
            self._empty_value_pages.add(path)

    def _paging_fault(self, jql: str) -> str | None:
        with self._record_lock:
            for project, mode in self._paging_faults.items():
                if project is None or f'project = "{project}"' in jql:
                    return mode
        return None

    def inject(
        self, kind: str, *, path: str | None = None, times: int = 1, retry_after: float = 0, match: str | None = None
    ) -> None:
        """Make the next ``times`` requests (whose path contains ``path`` and, if ``match`` is given, one of whose
        parameters, e.g. the JQL, contains ``match``) fail: ``"429"`` (with ``Retry-After``: ``retry_after`` rounded
        up to whole seconds), ``"500"``/``"503"``, ``"401"``/``"403"``/``"404"`` (JSON ``errorMessages``), ``"drop"``
        (socket closed without a response), ``"silent"`` (the connection is accepted and never answered, until the
        emulator stops) or ``"trickle"`` (the real answer, one byte per second). Injections queue up; a request
        takes the first pending one that matches it."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
        if times < 1:
            raise ValueError("times must be >= 1")
        if retry_after < 0:
            raise ValueError("retry_after must be >= 0")
        with self._record_lock:
            self._faults.append(_Fault(kind, path, times, retry_after, match))

    def clear_faults(self) -> None:
        """Forget every pending injected fault and broken paging."""
        with self._record_lock:
            self._faults.clear()
            self._paging_faults.clear()
            self._empty_value_pages.clear()

    def pending_faults(self) -> int:
        """How many injected failures are still to be served."""
        with self._record_lock:
            return sum(f.remaining for f in self._faults)

    def calls(self, path_prefix: str = "") -> list[RecordedRequest]:
        """Every recorded request whose path starts with ``path_prefix``, faults included, in arrival order."""
        with self._record_lock:
            return [r for r in self.requests if r.path.startswith(path_prefix)]

    def answered(self, path_prefix: str = "") -> list[RecordedRequest]:
        """The recorded requests under ``path_prefix`` that were answered with HTTP 200."""
        return [r for r in self.calls(path_prefix) if r.status == 200]

    def paths(self) -> list[str]:
        """The path of every recorded request, in arrival order."""
        with self._record_lock:
            return [r.path for r in self.requests]

    def reset_log(self) -> None:
        """Forget the recorded requests."""
        with self._record_lock:
            self.requests.clear()

    def _take_fault(self, path: str, params: Mapping[str, str]) -> _Fault | None:
        with self._record_lock:
            for fault in self._faults:
                if fault.match is not None and not any(fault.match in v for v in params.values()):
                    continue
                if fault.path is None or fault.path in path:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    # -- HTTP plumbing --------------------------------------------------------------------------------------------

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        split = urlsplit(request.path)
        path = split.path
        params = _parse_params(split.query, request)
        auth_label, authorized = self._authenticate(request.headers.get("Authorization"))
        record = RecordedRequest(request.command, path, params, 0, auth_label)
        with self._record_lock:
            self.requests.append(record)

        fault = self._take_fault(path, params)
        if fault is not None:
            if fault.kind in ("drop", "silent"):
                if fault.kind == "silent":
                    self._stopping.wait()
                request.close_connection = True
                return
            if fault.kind == "trickle":
                self._trickle(request, record, path, params)
                return
            headers = {"Retry-After": str(math.ceil(fault.retry_after))} if fault.kind == "429" else {}
            error = _ApiError(int(fault.kind), _FAULT_MESSAGES[fault.kind], headers)
            _send_json(request, record, error.status, error.body, error.headers)
            return
        if not authorized:
            _send(request, record, 401, b"Unauthorized", "text/plain;charset=UTF-8")
            return
        try:
            with self.site.lock:
                body = self._dispatch(request.command, path, params)
        except _ApiError as error:
            _send_json(request, record, error.status, error.body, error.headers)
            return
        except JqlError as error:
            _send_json(request, record, 400, {"errorMessages": [str(error)], "errors": {}})
            return
        except Exception:
            self.errors.append(traceback.format_exc())
            _send_json(request, record, 500, {"errorMessages": ["Internal emulator error"], "errors": {}})
            return
        _send_json(request, record, 200, body)

    def _trickle(
        self, request: BaseHTTPRequestHandler, record: RecordedRequest, path: str, params: dict[str, str]
    ) -> None:
        """The real answer (status line, headers, body) written one byte per second: every socket read of the
        client gets a byte well within any read timeout, so only a deadline on the whole request stops it."""
        with self.site.lock:
            body = json.dumps(self._dispatch(request.command, path, params)).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {JSON_CONTENT_TYPE}\r\nContent-Length: {len(body)}\r\n\r\n"
        record.status = 200
        request.close_connection = True
        try:
            for byte in head.encode() + body:
                if self._stopping.wait(TRICKLE_SECONDS_PER_BYTE):
                    return
                request.wfile.write(bytes([byte]))
                request.wfile.flush()
        except OSError:
            return  # the client gave up

    def _authenticate(self, header: str | None) -> tuple[str, bool]:
        return atlassian_caller(header, self.username, self.api_token, self.personal_access_token, self.cloud)

    def _dispatch(self, method: str, path: str, params: dict[str, str]) -> Any:
        match = re.fullmatch(r"/rest/api/(2|3|latest)/(.*?)/?", path)
        if match is None:
            raise _ApiError(404, f"No resource found for {path}.")
        version = 3 if match.group(1) == "3" else 2
        if version == 3 and not self.cloud:
            raise _ApiError(404, f"No resource found for {path}.")
        resource = match.group(2)
        for pattern, methods, handler in self._routes:
            route = pattern.fullmatch(resource)
            if route is None:
                continue
            if method not in methods:
                raise _ApiError(405, f"Method {method} is not allowed for {path}.")
            return handler(_Call(method, version, path, params), *route.groups())
        raise _ApiError(404, f"No resource found for {path}.")

    # -- helpers for handlers -------------------------------------------------------------------------------------

    @staticmethod
    def _int(params: dict[str, str], name: str, default: int) -> int:
        raw = params.get(name)
        if raw in (None, ""):
            return default
        try:
            value = int(raw)
        except ValueError:
            raise _ApiError(400, f"The '{name}' parameter must be an integer, got '{raw}'.") from None
        if value < 0:
            raise _ApiError(400, f"The '{name}' parameter must not be negative.")
        return value

    def _visible_project(self, key_or_id: str) -> JiraProject:
        project = self.site.project(key_or_id)
        if project is None or not project.visible:
            raise _ApiError(404, f"No project could be found with key '{key_or_id}'.")
        return project

    def _visible_issue(self, id_or_key: str) -> dict[str, Any]:
        issue = self.site.issue(id_or_key)
        project = self.site.issue_project(issue) if issue is not None else None
        if issue is None or project is None or not project.visible:
            raise _ApiError(404, ISSUE_NOT_FOUND_MESSAGE)
        return issue

    def _values_page(self, call: _Call, items: list[Any], cap: int) -> tuple[list[Any], dict[str, Any]]:
        """One ``startAt``/``maxResults`` page of ``items`` and the paging keys of a Cloud ``values`` answer
        (``maxResults`` capped at ``cap``; 0 or absent means ``cap``)."""
        start = self._int(call.params, "startAt", 0)
        size = min(self._int(call.params, "maxResults", 0) or cap, cap)
        page = items[start : start + size]
        with self._record_lock:
            broken = any(part in call.path for part in self._empty_value_pages)
        if broken:
            return [], {"maxResults": size, "startAt": start, "total": len(items), "isLast": False}
        return page, {
            "maxResults": size,
            "startAt": start,
            "total": len(items),
            "isLast": start + len(page) >= len(items),
        }

    def _user_url(self, version: int, account_id: str) -> str:
        return f"{self.url}/rest/api/{version}/user?{urlencode({'accountId': account_id})}"

    def _project_object(self, project: JiraProject, version: int) -> dict[str, Any]:
        return {
            "expand": "description,lead,issueTypes,url,projectKeys,permissions,insight",
            "self": f"{self.url}/rest/api/{version}/project/{project.id}",
            "id": project.id,
            "key": project.key,
            "name": project.name,
            "archived": project.archived,
            "projectTypeKey": "software",
            "simplified": False,
            "style": "classic",
            "isPrivate": False,
        }

    def _listed_projects(self, params: dict[str, str], paged: bool = False) -> list[JiraProject]:
        # Cloud's paged /project/search filters by `status` (live, archived, deleted; default live) and
        # ignores `includeArchived`; Server's /project list takes `includeArchived`.
        if paged:
            statuses = {s.strip() for s in (params.get("status") or "live").split(",")}
            live, archived = "live" in statuses, "archived" in statuses
        else:
            live, archived = True, (params.get("includeArchived") or "").lower() == "true"
        projects = [p for p in self.site.projects.values() if p.visible and (archived if p.archived else live)]
        return sorted(projects, key=lambda p: p.key)

    def _matching(self, jql: str) -> list[dict[str, Any]]:
        matches, order, bounded = compile_jql(jql, self.site)
        if self.cloud and not bounded:
            raise _ApiError(400, UNBOUNDED_JQL_MESSAGE)
        found = []
        for issue in self.site.issues.values():
            project = self.site.issue_project(issue)
            if project is not None and project.searchable and matches(issue):
                found.append(issue)
        return sort_issues(found, order)

    # -- endpoints ------------------------------------------------------------------------------------------------

    def _myself(self, call: _Call) -> dict[str, Any]:
        site = self.site
        return {
            "self": f"{self.url}/rest/api/{call.version}/user?accountId={site.account_id}",
            "accountId": site.account_id,
            "accountType": "atlassian",
            "name": self.username,
            "emailAddress": self.username,
            "displayName": site.display_name,
            "active": True,
            "timeZone": site.user_timezone,
            "locale": "en_US",
        }

    def _server_info(self, call: _Call) -> dict[str, Any]:
        return {
            "baseUrl": self.url,
            "deploymentType": "Cloud" if self.cloud else "Server",
            "version": "1001.0.0-SNAPSHOT" if self.cloud else "9.12.0",
            "versionNumbers": [1001, 0, 0] if self.cloud else [9, 12, 0],
            "serverTitle": "Jira emulator",
        }

    def _project_list(self, call: _Call) -> list[dict[str, Any]]:
        return [self._project_object(p, call.version) for p in self._listed_projects(call.params)]

    def _project_search(self, call: _Call) -> dict[str, Any]:
        if not self.cloud:
            raise _ApiError(404, f"No resource found for {call.path}.")
        projects = self._listed_projects(call.params, paged=True)
        start = self._int(call.params, "startAt", 0)
        size = min(self._int(call.params, "maxResults", 0) or self.project_page_size, self.project_page_size)
        page = projects[start : start + size]
        is_last = start + len(page) >= len(projects)
        query = {k: v for k, v in call.params.items() if k not in ("startAt", "maxResults")}
        out: dict[str, Any] = {
            "self": f"{self.url}{call.path}?{urlencode({**query, 'startAt': start, 'maxResults': size})}",
            "maxResults": size,
            "startAt": start,
            "total": len(projects),
            "isLast": is_last,
            "values": [self._project_object(p, call.version) for p in page],
        }
        if not is_last:
            out["nextPage"] = (
                f"{self.url}{call.path}?{urlencode({**query, 'startAt': start + size, 'maxResults': size})}"
            )
        return out

    def _project_get(self, call: _Call, key: str) -> dict[str, Any]:
        return self._project_object(self._visible_project(key), call.version)

    def _permission_scheme(self, call: _Call, key: str) -> dict[str, Any]:
        project = self._visible_project(key)
        scheme_id = 10000 + project.index
        grants: list[dict[str, Any]] = []

        def grant(holder: dict[str, Any], permission: str) -> None:
            grant_id = scheme_id * 100 + len(grants)
            grants.append(
                {
                    "id": grant_id,
                    "self": f"{self.url}/rest/api/{call.version}/permissionscheme/{scheme_id}/permission/{grant_id}",
                    "holder": holder,
                    "permission": permission,
                }
            )

        for group in project.browse_groups:
            grant({"type": "group", "parameter": group, "value": group, "expand": "group"}, "BROWSE_PROJECTS")
        for role_id in project.role_actors:
            grant(
                {"type": "projectRole", "parameter": role_id, "value": role_id, "expand": "projectRole"},
                "BROWSE_PROJECTS",
            )
        for holder in project.other_browse_holders:
            grant(dict(holder), "BROWSE_PROJECTS")
        grant(
            {"type": "group", "parameter": "jira-admins", "value": "jira-admins", "expand": "group"},
            "ADMINISTER_PROJECTS",
        )
        scheme: dict[str, Any] = {
            "expand": "permissions,user,group,projectRole,field,all",
            "id": scheme_id,
            "self": f"{self.url}/rest/api/{call.version}/permissionscheme/{scheme_id}",
            "name": f"{project.key} scheme",
            "description": f"Permission scheme of {project.name}",
        }
        if "permissions" in (call.params.get("expand") or "").split(",") or "all" in (call.params.get("expand") or ""):
            scheme["permissions"] = grants
        return scheme

    def _project_roles(self, call: _Call, key: str) -> dict[str, str]:
        project = self._visible_project(key)
        return {
            role["name"]: f"{self.url}/rest/api/{call.version}/project/{project.id}/role/{role_id}"
            for role_id, role in project.role_actors.items()
        }

    def _project_role(self, call: _Call, key: str, role_id: str) -> dict[str, Any]:
        project = self._visible_project(key)
        role = project.role_actors.get(role_id)
        if role is None:
            raise _ApiError(404, f"Can not find a project role with id: {role_id}")
        actors: list[dict[str, Any]] = []
        for group in role["groups"]:
            actors.append(
                {
                    "id": 20000 + len(actors),
                    "type": "atlassian-group-role-actor",
                    "name": group,
                    "displayName": group,
                    "actorGroup": {"name": group, "displayName": group},
                }
            )
        for account in role["users"]:
            actors.append(
                {
                    "id": 20000 + len(actors),
                    "type": "atlassian-user-role-actor",
                    "name": account,
                    "displayName": account,
                    "actorUser": {"accountId": account},
                }
            )
        return {
            "self": f"{self.url}/rest/api/{call.version}/project/{project.id}/role/{role_id}",
            "name": role["name"],
            "id": int(role_id) if role_id.isdigit() else role_id,
            "description": f"{role['name']} of {project.key}",
            "actors": actors,
        }

    def _search_old(self, call: _Call) -> dict[str, Any]:
        if self.cloud:
            raise _ApiError(410, GONE_MESSAGE)
        params = call.params
        selection = _FieldSelection(params.get("fields"), "*navigable")
        cap = self.id_only_max_results_cap if selection.id_only else self.max_results_cap
        limit = min(self._int(params, "maxResults", 50), cap)
        start = self._int(params, "startAt", 0)
        found = self._matching(params.get("jql") or "")
        fault = self._paging_fault(params.get("jql") or "")
        if fault == "ignore_start":
            start = 0
        page = [] if fault == "empty_pages" else found[start : start + limit]
        return {
            "expand": "schema,names",
            "startAt": start,
            "maxResults": limit,
            "total": len(found) + (start + limit + 1 if fault == "empty_pages" else 0),
            "issues": [self._search_result(issue, call.version, selection) for issue in page],
        }

    def _search_jql(self, call: _Call) -> dict[str, Any]:
        if not self.cloud:
            raise _ApiError(404, f"No resource found for {call.path}.")
        params = call.params
        selection = _FieldSelection(params.get("fields"), "id")
        cap = self.id_only_max_results_cap if selection.id_only else self.max_results_cap
        limit = min(self._int(params, "maxResults", 50), cap)
        if limit < 1:
            raise _ApiError(400, "The 'maxResults' parameter must be greater than 0.")
        start = _decode_page_token(params.get("nextPageToken"))
        found = self._matching(params.get("jql") or "")
        fault = self._paging_fault(params.get("jql") or "")
        page = [] if fault == "empty_pages" else found[start : start + limit]
        out: dict[str, Any] = {"issues": []}
        for issue in page:
            if selection.id_only:
                item = {"id": issue["id"]}
                if "key" in selection.explicit:
                    item["key"] = issue["key"]
                out["issues"].append(item)
            else:
                out["issues"].append(self._search_result(issue, call.version, selection))
        end = start + len(page)
        out["isLast"] = end >= len(found)
        if not out["isLast"]:
            out["nextPageToken"] = _encode_page_token(end)
        if fault == "repeat_token":
            # A cursor bug or a caching proxy: the second page's token, forever.
            out["isLast"], out["nextPageToken"] = False, _encode_page_token(limit)
        elif fault == "empty_pages":
            out["isLast"], out["nextPageToken"] = False, _encode_page_token(start + 1)
        return out

    def _approximate_count(self, call: _Call) -> dict[str, Any]:
        if not self.cloud:
            raise _ApiError(404, f"No resource found for {call.path}.")
        return {"count": len(self._matching(call.params.get("jql") or ""))}

    def _search_result(self, issue: dict[str, Any], version: int, selection: _FieldSelection) -> dict[str, Any]:
        rendered = self.site.render(
            issue, version, include=selection, embed_comments=self.embed_comments, base_url=self.url
        )
        return {"expand": "operations,versionedRepresentations,editmeta,changelog,renderedFields", **rendered}

    def _issue_get(self, call: _Call, id_or_key: str) -> dict[str, Any]:
        issue = self._visible_issue(id_or_key)
        selection = _FieldSelection(call.params.get("fields"), "*all")
        include = None if selection.all and not selection.excluded else selection
        rendered = self.site.render(issue, call.version, include=include, base_url=self.url)
        return {
            "expand": "renderedFields,names,schema,operations,editmeta,changelog,versionedRepresentations",
            **rendered,
        }

    def _comments(self, call: _Call, id_or_key: str) -> dict[str, Any]:
        issue = self._visible_issue(id_or_key)
        params = call.params
        comments = sorted_comments(issue)
        order_by = (params.get("orderBy") or "created").strip()
        if order_by.lstrip("+-") != "created":
            raise _ApiError(400, f"Ordering comments by '{order_by}' is not supported.")
        if order_by.startswith("-"):
            comments.reverse()
        start = self._int(params, "startAt", 0)
        limit = min(self._int(params, "maxResults", self.comment_page_cap), self.comment_page_cap)
        page = comments[start : start + limit]
        return {
            "comments": [self.site.render_comment(issue["id"], c, call.version, base_url=self.url) for c in page],
            "startAt": start,
            "maxResults": limit,
            "total": len(comments),
        }

    def _comment_get(self, call: _Call, id_or_key: str, comment_id: str) -> dict[str, Any]:
        issue = self._visible_issue(id_or_key)
        for comment in sorted_comments(issue):
            if str(comment.get("id")) == comment_id:
                return self.site.render_comment(issue["id"], comment, call.version, base_url=self.url)
        raise _ApiError(404, f"Can not find a comment for the id: {comment_id}.")

    # -- directory endpoints --------------------------------------------------------------------------------------

    def _group_member(self, call: _Call) -> dict[str, Any]:
        params = call.params
        wanted_id, wanted_name = params.get("groupId"), params.get("groupname")
        if wanted_id:
            name = next((g for g in self.site.groups if group_id(g) == wanted_id), None)
        elif wanted_name:
            name = wanted_name if wanted_name in self.site.groups else None
        else:
            raise _ApiError(400, "You must specify a group name or a group id.")
        if name is None:
            raise _ApiError(404, "Group not found")
        # atlassian-python-api sends the Python bool as "True"/"False".
        inactive = (params.get("includeInactiveUsers") or "").lower() == "true"
        members = [self.site.users[a] for a in self.site.groups[name] if a in self.site.users]
        members = [u for u in members if inactive or u["active"]]
        page, paging = self._values_page(call, members, self.directory_page_cap)
        query = {k: v for k, v in params.items() if k not in ("startAt", "maxResults")}

        def page_url(start: int) -> str:
            return f"{self.url}{call.path}?{urlencode({**query, 'startAt': start, 'maxResults': paging['maxResults']})}"

        out: dict[str, Any] = {
            "self": page_url(paging["startAt"]),
            **paging,
            "values": [self._member_object(u, call.version) for u in page],
        }
        if not paging["isLast"]:
            out["nextPage"] = page_url(paging["startAt"] + paging["maxResults"])
        return out

    def _member_object(self, user: dict[str, Any], version: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "self": self._user_url(version, user["accountId"]),
            "accountId": user["accountId"],
            "name": user["name"],
            "displayName": user["displayName"],
            "active": user["active"],
        }
        if user.get("emailAddress") is not None:
            out["emailAddress"] = user["emailAddress"]
        return out

    def _group_bulk(self, call: _Call) -> dict[str, Any]:
        params = call.params
        names = sorted(self.site.groups)
        wanted_names, wanted_ids = _id_filter(params.get("groupName")), _id_filter(params.get("groupId"))
        if wanted_names is not None:
            names = [n for n in names if n in wanted_names]
        if wanted_ids is not None:
            names = [n for n in names if group_id(n) in wanted_ids]
        page, paging = self._values_page(call, names, self.directory_page_cap)
        return {**paging, "values": [{"name": n, "groupId": group_id(n)} for n in page]}

    def _groups_picker(self, call: _Call) -> dict[str, Any]:
        params = call.params
        query = params.get("query") or ""
        excluded = _id_filter(params.get("exclude")) or set()
        excluded_ids = _id_filter(params.get("excludeId")) or set()
        limit = min(self._int(params, "maxResults", 20), self.group_picker_cap)
        # Case-insensitive as Server matches; Cloud's explicit caseInsensitive=false makes it exact.
        exact = (params.get("caseInsensitive") or "").lower() == "false"

        def matches(name: str) -> bool:
            found = query in name if exact else query.lower() in name.lower()
            return found and name not in excluded and group_id(name) not in excluded_ids

        matching = [g for g in sorted(self.site.groups) if matches(g)]
        shown = matching[:limit]
        return {
            "header": f"Showing {len(shown)} of {len(matching)} matching groups",
            "total": len(matching),
            "groups": [
                {"name": g, "html": _picker_html(g, query), "labels": [], "groupId": group_id(g)} for g in shown
            ],
        }

    def _scheme_object(self, version: int) -> dict[str, Any]:
        return {
            "self": f"{self.url}/rest/api/{version}/issuesecurityschemes/{SECURITY_SCHEME_ID}",
            "id": int(SECURITY_SCHEME_ID),
            "name": SECURITY_SCHEME_NAME,
            "description": "",
            "defaultSecurityLevelId": -1,
        }

    def _security_schemes(self, call: _Call) -> dict[str, Any]:
        schemes = [self._scheme_object(call.version)] if self.site.security_levels else []
        return {"issueSecuritySchemes": schemes}

    def _security_scheme(self, call: _Call, scheme_id: str) -> dict[str, Any]:
        if scheme_id != SECURITY_SCHEME_ID or not self.site.security_levels:
            raise _ApiError(404, f"Issue security scheme with id {scheme_id} does not exist.")
        levels = [
            {
                "self": f"{self.url}/rest/api/{call.version}/securitylevel/{level_id}",
                "id": level_id,
                "name": level["name"],
                "description": level["description"],
            }
            for level_id, level in self.site.security_levels.items()
        ]
        return {**self._scheme_object(call.version), "levels": levels}

    def _security_level_members(self, call: _Call) -> dict[str, Any]:
        params = call.params
        levels, member_ids = _id_filter(params.get("levelId")), _id_filter(params.get("id"))
        # Cloud's current parameter is schemeId; issueSecuritySchemeId is its older name.
        schemes = _id_filter(params.get("schemeId") or params.get("issueSecuritySchemeId"))
        in_scheme = schemes is None or SECURITY_SCHEME_ID in schemes
        members: list[dict[str, Any]] = []
        member_id = 10000  # numbered over every level, so a member keeps its id whatever the filter
        for level_id, level in self.site.security_levels.items():
            holders = [
                *({"type": "group", "parameter": g, "value": g, "expand": "group"} for g in level["groups"]),
                *({"type": "user", "parameter": u, "value": u, "expand": "user"} for u in level["users"]),
            ]
            for holder in holders:
                if (
                    in_scheme
                    and (levels is None or level_id in levels)
                    and (member_ids is None or str(member_id) in member_ids)
                ):
                    members.append(
                        {
                            "id": member_id,
                            "issueSecurityLevelId": int(level_id) if level_id.isdigit() else level_id,
                            "holder": holder,
                        }
                    )
                member_id += 1
        page, paging = self._values_page(call, members, self.directory_page_cap)
        return {**paging, "values": page}


# -- module helpers ---------------------------------------------------------------------------------------------------


def _id_filter(value: str | None) -> set[str] | None:
    """A comma-joined multi-value parameter as a set, None when absent or empty (no filter)."""
    wanted = {v.strip() for v in (value or "").split(",") if v.strip()}
    return wanted or None


def _picker_html(name: str, query: str) -> str:
    """A group picker suggestion: the name, HTML-escaped, its first match of ``query`` in bold."""
    at = name.lower().find(query.lower()) if query else -1
    if at < 0:
        return html.escape(name)
    end = at + len(query)
    return f"{html.escape(name[:at])}<b>{html.escape(name[at:end])}</b>{html.escape(name[end:])}"


def _encode_page_token(offset: int) -> str:
    return base64.b64encode(str(offset).encode()).decode()


def _decode_page_token(token: str | None) -> int:
    if not token:
        return 0
    try:
        offset = int(base64.b64decode(token.encode(), validate=True).decode())
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _ApiError(400, "Invalid nextPageToken.") from None
    if offset < 0:
        raise _ApiError(400, "Invalid nextPageToken.")
    return offset


def _parse_params(query: str, request: BaseHTTPRequestHandler) -> dict[str, str]:
    """Query string and JSON body merged (the body wins): single values as strings, lists comma-joined. The body is
    always read in full so the keep-alive connection stays in sync."""
    params = {k: ",".join(v) for k, v in parse_qs(query, keep_blank_values=True).items()}
    length = int(request.headers.get("Content-Length") or 0)
    raw = request.rfile.read(length) if length > 0 else b""
    if not raw:
        return params
    try:
        body = json.loads(raw)
    except ValueError:
        return params
    if isinstance(body, dict):
        params.update({k: _stringify(v) for k, v in body.items() if v is not None})
    return params


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ",".join(str(v) for v in value)
    return json.dumps(value)


def _send(
    request: BaseHTTPRequestHandler,
    record: RecordedRequest,
    status: int,
    payload: bytes,
    content_type: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    record.status = status
    send(request, status, payload, content_type, headers)


def _send_json(
    request: BaseHTTPRequestHandler,
    record: RecordedRequest,
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
) -> None:
    _send(request, record, status, json.dumps(body).encode(), JSON_CONTENT_TYPE, headers)
