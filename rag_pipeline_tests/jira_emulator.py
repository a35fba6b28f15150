"""A small, stdlib-only emulator of the Jira REST API (Cloud or Server/Data Center) for tests and benchmarks.

It serves the endpoints a Jira ETL calls from a mutable in-memory :class:`JiraSite` on ``http://127.0.0.1:<port>``,
so the real ``atlassian.Jira`` client (atlassian-python-api 5.x) can be pointed at it with ``url=emulator.url``.

What it reproduces (request paths and shapes as surveyed in ``shared/notes/slack_jira_clients.md`` §3):

* ``/rest/api/2`` and ``/rest/api/3`` (``latest`` = 2): v2 serves wiki-text bodies, v3 serves Atlassian Document
  Format (:func:`body_for_version` converts either way). Server mode has no v3.
* Auth: HTTP Basic ``username:api_token`` (Cloud and Server) or ``Bearer <personal access token>`` (Server only);
  anything else is a ``text/plain`` 401 (atlassian raises ``HTTPError("Unauthorized (401)")``).
* Search. Cloud: ``GET|POST search/jql`` with opaque ``nextPageToken`` paging, ``isLast`` and no ``total``; only
  ``id`` unless ``fields`` is given; ``maxResults`` capped at 100 (5000 for id/key-only requests); unbounded JQL
  (no restriction) is rejected; the old ``search`` endpoint answers **410 Gone** (CHANGE-2046). Server:
  ``GET|POST search`` with ``startAt``/``maxResults``/``total``.
* A JQL subset, parsed properly: ``project``, ``updated``/``created``, ``id``, ``key`` clauses joined by ``AND``
  and ``ORDER BY``. Dates are read in the **site user's timezone** with **minute** precision, like Jira, and
  compared with the issues' exact ``updated``/``created`` instants. Unknown or invisible projects and unknown keys
  are 400s, like Jira.
* Issues: embedded comments truncated to ``embed_comments`` in search results (``GET issue`` embeds them all),
  ``issue/{key}/comment`` paging, moved issues resolving by their old key, deleted issues 404.
* Projects: Cloud ``project/search`` pages with an absolute ``nextPage`` URL; Server ``project`` is one list;
  archived projects only with ``status=archived`` (Cloud
  ``project/search``) or ``includeArchived`` (``project``); permission schemes (``BROWSE_PROJECTS`` grants to groups and
  project roles) and role actors.
* Fault injection: HTTP 429 with ``Retry-After``, 500/503, 401/403/404, and dropped connections; every request is
  recorded (:attr:`JiraEmulator.requests`).

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
import copy
import functools
import gzip
import json
import math
import re
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit
from zoneinfo import ZoneInfo

from rag_pipeline_tests.local_server import LocalHttpService, send

__all__ = [
    "FAULT_KINDS",
    "GONE_MESSAGE",
    "ISSUE_NOT_FOUND_MESSAGE",
    "JSON_CONTENT_TYPE",
    "UNBOUNDED_JQL_MESSAGE",
    "JiraEmulator",
    "JiraProject",
    "JiraSite",
    "JqlError",
    "RecordedRequest",
    "adf_to_text",
    "body_for_version",
    "compile_jql",
    "parse_jira_time",
    "parse_jql_date",
    "text_to_adf",
]

FAULT_KINDS = frozenset({"429", "500", "503", "drop", "401", "403", "404"})
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
# Fields whose values are rich text: strings (wiki markup) in v2, ADF documents in v3.
_RICH_TEXT_FIELDS = ("description", "environment")
# Fields that "*navigable" (the Server search default) leaves out.
_NON_NAVIGABLE = frozenset({"comment", "worklog"})
_KEY_RE = re.compile(r"^([A-Z][A-Z0-9_]*)-(\d+)$")


# -- time -------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1 << 16)
def parse_jira_time(value: str) -> datetime:
    """A Jira timestamp (``2015-04-18T15:54:04.000+0000``; also ``Z``/``+00:00`` forms) as an aware datetime."""
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without timezone: {value!r}")
    return parsed


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_jira_time(value)
    except ValueError:
        return None


# -- bodies -----------------------------------------------------------------------------------------------------------

# ADF nodes whose children are inline content: each becomes one block of text.
_INLINE_NODES = frozenset(
    {"text", "hardBreak", "mention", "emoji", "inlineCard", "status", "date", "mediaInline", "placeholder"}
)


def _is_adf(body: Any) -> bool:
    return isinstance(body, dict) and body.get("type") == "doc"


def _inline_text(node: Any) -> str:
    if not isinstance(node, dict):
        return ""
    kind = node.get("type")
    attrs = node.get("attrs") if isinstance(node.get("attrs"), dict) else {}
    if kind == "text":
        return str(node.get("text") or "")
    if kind == "hardBreak":
        return "\n"
    if kind in ("mention", "emoji", "status"):
        return str(attrs.get("text") or attrs.get("shortName") or "")
    if kind in ("inlineCard", "blockCard", "embedCard"):
        return str(attrs.get("url") or "")
    if kind == "date":
        try:
            return datetime.fromtimestamp(int(attrs.get("timestamp")) / 1000, UTC).strftime("%Y-%m-%d")
        except (TypeError, ValueError, OverflowError):
            return ""
    return "".join(_inline_text(child) for child in node.get("content") or ())


def _blocks(node: Any) -> list[str]:
    if not isinstance(node, dict):
        return []
    kind = node.get("type")
    content = [c for c in node.get("content") or () if isinstance(c, dict)]
    if kind in _INLINE_NODES:
        return [_inline_text(node)]
    if kind in ("blockCard", "embedCard"):
        return [_inline_text(node)]
    if content and all(c.get("type") in _INLINE_NODES for c in content):
        return ["".join(_inline_text(c) for c in content)]
    out: list[str] = []
    for child in content:
        out.extend(_blocks(child))
    return out


def adf_to_text(doc: Any) -> str:
    """The plain text of an ADF document: the text of its text nodes (plus mention/emoji/status text, card URLs,
    dates as ``YYYY-MM-DD``; ``hardBreak`` -> newline), blocks separated by a blank line. This is how the emulator
    serves an ADF body on a v2 endpoint."""
    return "\n\n".join(block for block in _blocks(doc) if block.strip())


def text_to_adf(text: str) -> dict[str, Any]:
    """A wiki/plain string as an ADF document: one paragraph per non-blank paragraph (split on blank lines), single
    newlines inside a paragraph as ``hardBreak`` nodes between text nodes. This is how the emulator serves a string
    body on a v3 endpoint."""
    normalized = text.replace("\r\n", "\n").replace("\r", "\n")
    paragraphs: list[dict[str, Any]] = []
    for paragraph in re.split(r"\n[ \t]*\n", normalized):
        paragraph = paragraph.strip("\n")
        if not paragraph.strip():
            continue
        content: list[dict[str, Any]] = []
        for i, line in enumerate(paragraph.split("\n")):
            if i:
                content.append({"type": "hardBreak"})
            if line:
                content.append({"type": "text", "text": line})
        paragraphs.append({"type": "paragraph", "content": content})
    return {"type": "doc", "version": 1, "content": paragraphs}


def body_for_version(body: Any, api_version: int) -> Any:
    """A stored description/comment body as an endpoint of ``api_version`` serves it.

    v2: strings as they are, ADF documents as plain text (:func:`adf_to_text`). v3: ADF documents as they are,
    strings as ADF (:func:`text_to_adf`). Anything else (``None``, or a bad body such as an int) is served unchanged,
    so a client-side reader can report it. The result never shares structure with ``body``.
    """
    if api_version >= 3:
        if isinstance(body, str):
            return text_to_adf(body)
        return copy.deepcopy(body)
    if _is_adf(body):
        return adf_to_text(body)
    return copy.deepcopy(body)


# -- the site ---------------------------------------------------------------------------------------------------------


@dataclass
class JiraProject:
    """One project: identity, archive/visibility flags and who may browse it (groups and project roles)."""

    id: str
    key: str
    name: str
    archived: bool = False
    visible: bool = True
    browse_groups: list[str] = field(default_factory=list)
    # role id -> {"name": ..., "groups": [...], "users": [accountId, ...]}; each role also gets BROWSE_PROJECTS
    role_actors: dict[str, dict[str, Any]] = field(default_factory=dict)
    index: int = 0  # position in the site (the permission scheme id is 10000 + index)

    @property
    def searchable(self) -> bool:
        """Whether its issues can be found by JQL (visible to the API user and not archived)."""
        return self.visible and not self.archived


def _key_sort(key: str) -> tuple[str, int]:
    project, _, number = key.rpartition("-")
    return (project, int(number)) if number.isdigit() else (key, 0)


def _id_sort(issue_id: str) -> tuple[int, str]:
    return (int(issue_id), "") if issue_id.isdigit() else (0, issue_id)


def _sorted_comments(issue: dict[str, Any]) -> list[dict[str, Any]]:
    """The stored comments of an issue, oldest first (ties keep their stored order)."""
    comment = issue.get("fields", {}).get("comment")
    comments = [c for c in (comment.get("comments") or []) if isinstance(c, dict)] if isinstance(comment, dict) else []
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(comments, key=lambda c: _instant(c.get("created")) or epoch)


class JiraSite:
    """Projects and issues of one Jira site (mutable while the emulator serves it).

    Issues are stored as REST v2-style objects (``{"id", "key", "fields": {...}}``) whose bodies may be wiki strings
    or ADF documents; the full comment list is ``fields.comment.comments``. Mutate the site through its methods (or
    directly under :attr:`lock`) while an emulator serves it; the emulator holds the same lock while answering.
    """

    def __init__(
        self,
        *,
        user_timezone: str = "America/Los_Angeles",
        account_id: str = "bot-account",
        display_name: str = "RAG Bot",
    ) -> None:
        ZoneInfo(user_timezone)  # validates
        self.user_timezone = user_timezone
        self.account_id = account_id
        self.display_name = display_name
        self.projects: dict[str, JiraProject] = {}
        self.issues: dict[str, dict[str, Any]] = {}  # id -> stored issue, in insertion order
        self._keys: dict[str, str] = {}  # current key (upper case) -> id
        self._aliases: dict[str, str] = {}  # former key of a moved issue -> id
        self.lock = threading.RLock()

    # -- projects -------------------------------------------------------------------------------------------------

    def add_project(
        self,
        key: str,
        name: str | None = None,
        *,
        project_id: str | None = None,
        archived: bool = False,
        browse_groups: Sequence[str] = ("jira-users",),
        role_actors: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        visible: bool = True,
    ) -> None:
        """Add (or replace) a project. ``role_actors``: ``{"10002": {"name": "Developers", "groups": [...],
        "users": [accountId, ...]}}``, roles that also get ``BROWSE_PROJECTS``. ``visible=False``: the API user
        cannot browse it (never listed; JQL naming it is a 400; its issues 404 and never match)."""
        if not _KEY_RE.match(f"{key}-1"):
            raise ValueError(f"invalid project key {key!r}")
        with self.lock:
            previous = self.projects.get(key)
            if project_id is None:
                used = {p.id for p in self.projects.values()}
                project_id = (
                    previous.id if previous else next(str(n) for n in range(10000, 10**9) if str(n) not in used)
                )
            roles = {
                str(role_id): {
                    "name": str(actors.get("name", f"Role {role_id}")),
                    "groups": [str(g) for g in actors.get("groups", ())],
                    "users": [str(u) for u in actors.get("users", ())],
                }
                for role_id, actors in (role_actors or {}).items()
            }
            self.projects[key] = JiraProject(
                id=str(project_id),
                key=key,
                name=name or key,
                archived=archived,
                visible=visible,
                browse_groups=list(browse_groups),
                role_actors=roles,
                index=previous.index if previous else len(self.projects),
            )

    def project(self, key_or_id: str) -> JiraProject | None:
        """A project by key (case-insensitive), id or name, visible or not."""
        wanted = key_or_id.strip()
        with self.lock:
            for project in self.projects.values():
                if wanted.upper() == project.key.upper() or wanted == project.id:
                    return project
            for project in self.projects.values():
                if wanted.lower() == project.name.lower():
                    return project
        return None

    # -- issues ---------------------------------------------------------------------------------------------------

    def add_issue(self, issue: dict[str, Any]) -> None:
        """Store a deep copy of a REST issue object (``{"id", "key", "fields": {"project": {"key"}, "updated",
        ...}}``). An unknown project is created from ``fields.project``; a missing ``fields.project.id``/``name`` is
        filled in from the site's project. An issue with the same id is replaced."""
        stored = copy.deepcopy(issue)
        issue_id, key = str(stored.get("id", "")), str(stored.get("key", ""))
        if not issue_id or not _KEY_RE.match(key):
            raise ValueError(f"an issue needs an id and a key like ABC-1, got id={issue_id!r} key={key!r}")
        fields = stored.setdefault("fields", {})
        raw_project = fields.get("project") if isinstance(fields.get("project"), dict) else {}
        project_key = str(raw_project.get("key") or key.rpartition("-")[0])
        stored["id"], stored["key"] = issue_id, key
        with self.lock:
            project = self.projects.get(project_key)
            if project is None:
                self.add_project(project_key, raw_project.get("name"), project_id=raw_project.get("id"))
                project = self.projects[project_key]
            fields["project"] = {**raw_project, "id": project.id, "key": project.key, "name": project.name}
            if issue_id in self.issues:
                self._forget(issue_id)
            self.issues[issue_id] = stored
            self._keys[key.upper()] = issue_id

    def _forget(self, issue_id: str) -> None:
        old = self.issues.pop(issue_id)
        if self._keys.get(old["key"].upper()) == issue_id:
            del self._keys[old["key"].upper()]

    def _resolve(self, id_or_key: str) -> str | None:
        wanted = str(id_or_key).strip()
        if wanted in self.issues:
            return wanted
        upper = wanted.upper()
        return self._keys.get(upper) or self._aliases.get(upper)

    def issue(self, id_or_key: str) -> dict[str, Any] | None:
        """The stored issue with this id, key or former key (of a moved issue), else None."""
        with self.lock:
            issue_id = self._resolve(id_or_key)
            return self.issues.get(issue_id) if issue_id else None

    def _require(self, id_or_key: str) -> dict[str, Any]:
        issue = self.issue(id_or_key)
        if issue is None:
            raise KeyError(f"no issue {id_or_key!r}")
        return issue

    def delete_issue(self, id_or_key: str) -> None:
        """Delete an issue (its id, key and former keys stop resolving)."""
        with self.lock:
            issue_id = self._require(id_or_key)["id"]
            self._forget(issue_id)
            self._aliases = {k: v for k, v in self._aliases.items() if v != issue_id}

    def move_issue(self, id_or_key: str, project_key: str, new_key: str, updated: str) -> None:
        """Move an issue to another project: new key, same id, ``fields.project`` and ``fields.updated`` changed.
        The old key still resolves to it (``GET issue/OLD-1`` and JQL ``key = OLD-1``), like Jira."""
        parse_jira_time(updated)
        if not _KEY_RE.match(new_key) or new_key.rpartition("-")[0] != project_key:
            raise ValueError(f"{new_key!r} is not a key of project {project_key!r}")
        with self.lock:
            issue = self._require(id_or_key)
            project = self.projects[project_key]
            if self._keys.get(new_key.upper(), issue["id"]) != issue["id"]:
                raise ValueError(f"{new_key} is taken")
            old_key = issue["key"]
            del self._keys[old_key.upper()]
            self._aliases[old_key.upper()] = issue["id"]
            self._aliases.pop(new_key.upper(), None)
            issue["key"] = new_key
            self._keys[new_key.upper()] = issue["id"]
            fields = issue["fields"]
            fields["project"] = {
                **fields.get("project", {}),
                "id": project.id,
                "key": project.key,
                "name": project.name,
            }
            fields["updated"] = updated

    def set_field(self, id_or_key: str, name: str, value: Any) -> None:
        """Set ``fields[name]`` of an issue to a deep copy of ``value`` (``updated`` is not touched)."""
        with self.lock:
            self._require(id_or_key)["fields"][name] = copy.deepcopy(value)

    def issue_project(self, issue: dict[str, Any]) -> JiraProject | None:
        """The site project an issue belongs to."""
        project = issue.get("fields", {}).get("project") or {}
        return self.projects.get(str(project.get("key", "")))

    # -- views ----------------------------------------------------------------------------------------------------

    def render(
        self,
        issue: dict[str, Any],
        api_version: int,
        *,
        include: Callable[[str], bool] | None = None,
        embed_comments: int | None = None,
        base_url: str | None = None,
    ) -> dict[str, Any]:
        """A served copy of a stored issue: the fields ``include`` accepts (all when None), bodies converted for
        ``api_version``, comments oldest first (the first ``embed_comments`` of them when given) with
        ``startAt``/``maxResults``/``total``; ``self`` links when ``base_url`` is given."""
        version = 3 if api_version >= 3 else 2
        issue_id = issue["id"]
        out: dict[str, Any] = {"id": issue_id}
        if base_url is not None:
            out["self"] = f"{base_url}/rest/api/{version}/issue/{issue_id}"
        out["key"] = issue["key"]
        fields: dict[str, Any] = {}
        for name, value in issue.get("fields", {}).items():
            if include is not None and not include(name):
                continue
            if name in _RICH_TEXT_FIELDS:
                fields[name] = body_for_version(value, version)
            elif name == "comment":
                comments = _sorted_comments(issue)
                shown = comments if embed_comments is None else comments[: max(embed_comments, 0)]
                fields[name] = {
                    "comments": [self.render_comment(issue_id, c, version, base_url=base_url) for c in shown],
                    "maxResults": len(shown),
                    "total": len(comments),
                    "startAt": 0,
                }
            else:
                fields[name] = copy.deepcopy(value)
        out["fields"] = fields
        return out

    @staticmethod
    def render_comment(
        issue_id: str, comment: dict[str, Any], api_version: int, *, base_url: str | None = None
    ) -> dict[str, Any]:
        """A served copy of a stored comment, its body converted for ``api_version``."""
        out = {k: (body_for_version(v, api_version) if k == "body" else copy.deepcopy(v)) for k, v in comment.items()}
        if base_url is not None and "id" in comment:
            out["self"] = f"{base_url}/rest/api/{api_version}/issue/{issue_id}/comment/{comment['id']}"
        return out

    def issue_view(self, id_or_key: str, api_version: int, *, base_url: str | None = None) -> dict[str, Any]:
        """The issue exactly as ``GET /rest/api/{api_version}/issue/{id}`` serves it (no ``fields`` filter): all
        comments embedded with ``startAt`` 0 and ``maxResults`` = ``total``, bodies converted for the version."""
        with self.lock:
            return self.render(self._require(id_or_key), api_version, base_url=base_url)

    # -- dumps ----------------------------------------------------------------------------------------------------

    def write_dump(self, path: Path, api_version: int, project_keys: Iterable[str] | None = None) -> Path:
        """Write :meth:`issue_view` of every issue (of ``project_keys`` if given), one JSON object per line,
        gzip-compressed if ``path`` ends with ``.gz``; returns ``path``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        wanted = set(project_keys) if project_keys is not None else None
        with self.lock:
            lines = [
                json.dumps(self.render(issue, api_version), ensure_ascii=False)
                for issue in self.issues.values()
                if wanted is None or issue["fields"]["project"]["key"] in wanted
            ]
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "wt", encoding="utf-8") as handle:
            for line in lines:
                handle.write(line + "\n")
        return path

    @classmethod
    def from_dump(
        cls,
        path: Path,
        *,
        projects: Iterable[str] | None = None,
        limit_per_project: int | None = None,
        **kw: Any,
    ) -> JiraSite:
        """A site holding the issues of a dump (``.jsonl`` or ``.jsonl.gz`` of REST issue objects), optionally only
        those of ``projects`` and the first ``limit_per_project`` of each. Each project seen is created from
        ``fields.project`` (id, key, name). Blank lines and lines that are not issue objects are skipped. ``kw``
        goes to the constructor."""
        site = cls(**kw)
        wanted = list(projects) if projects is not None else None
        markers = [f'"{key}-' for key in wanted] if wanted is not None else None
        counts: dict[str, int] = {}
        path = Path(path)
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                if markers is not None and not any(m in line for m in markers):
                    continue  # the issue's own key ("KEY-N") is always in its line
                try:
                    issue = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(issue, dict) or not isinstance(issue.get("fields"), dict):
                    continue
                project = issue["fields"].get("project") or {}
                key = str(project.get("key") or str(issue.get("key", "")).rpartition("-")[0])
                if wanted is not None and key not in wanted:
                    continue
                if limit_per_project is not None and counts.get(key, 0) >= limit_per_project:
                    continue
                try:
                    site.add_issue(issue)
                except ValueError:
                    continue
                counts[key] = counts.get(key, 0) + 1
        return site


# -- JQL --------------------------------------------------------------------------------------------------------------


class JqlError(Exception):
    """A JQL query the emulator rejects (HTTP 400 with this message in ``errorMessages``)."""


@dataclass(frozen=True)
class _Token:
    kind: str  # "str" (quoted), "word", "op", "punct"
    value: str

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.value.lower() in words


_TOKEN_RE = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<op>>=|<=|!=|!~|=|>|<|~)|(?P<punct>[(),])"""
    r"""|(?P<word>[^\s"'(),=<>!~]+))"""
)
_DATE_FIELDS = {"updated": "updated", "updateddate": "updated", "created": "created", "createddate": "created"}
_KEY_FIELDS = ("key", "issuekey", "issue", "id")
_ORDER_FIELDS = {
    "updated": "updated",
    "updateddate": "updated",
    "created": "created",
    "createddate": "created",
    "key": "key",
    "issuekey": "key",
    "id": "id",
}
_DATE_FORMATS = ("%Y-%m-%d %H:%M", "%Y/%m/%d %H:%M", "%Y-%m-%d", "%Y/%m/%d")
_PERIOD_RE = re.compile(r"^([-+]?)\s*((?:\d+\s*[wdhm]\s*)+)$")


def _tokenize(jql: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(jql):
        if not jql[pos:].strip():
            break
        match = _TOKEN_RE.match(jql, pos)
        if match is None or match.end() == pos:
            char = jql[pos:].lstrip()[:1]
            raise JqlError(f"Error in the JQL Query: The character '{char}' is a reserved JQL character.")
        kind = match.lastgroup or "word"
        value = match.group(kind)
        if kind == "str":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append(_Token(kind, value))
        pos = match.end()
    return tokens


@dataclass
class _Clause:
    field: str  # "project", "updated", "created", "id", "key"
    op: str  # "=", "!=", ">", ">=", "<", "<=", "in", "not in"
    values: list[str]


@dataclass
class _Jql:
    clauses: list[_Clause]
    order: list[tuple[str, bool]]  # (field, descending)


class _Parser:
    def __init__(self, jql: str) -> None:
        self.jql = jql
        self.tokens = _tokenize(jql)
        self.pos = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, what: str) -> _Token:
        token = self.peek()
        if token is None:
            raise self.error(f"Expecting {what} but reached the end of the query.")
        self.pos += 1
        return token

    def error(self, message: str) -> JqlError:
        return JqlError(f"Error in the JQL Query: {message} The invalid JQL is: {self.jql}")

    def parse(self) -> _Jql:
        clauses: list[_Clause] = []
        order: list[tuple[str, bool]] = []
        token = self.peek()
        if token is not None and not token.is_word("order"):
            clauses.append(self.clause())
            while (token := self.peek()) is not None and token.is_word("and"):
                self.pos += 1
                clauses.append(self.clause())
        token = self.peek()
        if token is not None and token.is_word("order"):
            self.pos += 1
            if not self.take("'by'").is_word("by"):
                raise self.error("Expecting 'by' after 'order'.")
            order.append(self.sort_key())
            while (token := self.peek()) is not None and token.kind == "punct" and token.value == ",":
                self.pos += 1
                order.append(self.sort_key())
        token = self.peek()
        if token is not None:
            if token.is_word("or", "not") or (token.kind == "punct" and token.value in "()"):
                raise self.error(f"'{token.value}' is not supported by the emulator (clauses joined by AND only).")
            raise self.error(f"Expecting either 'OR' or 'AND' but got '{token.value}'.")
        return _Jql(clauses, order)

    def clause(self) -> _Clause:
        token = self.take("a field name")
        if token.kind not in ("word", "str"):
            raise self.error(f"Expecting a field name but got '{token.value}'.")
        name = token.value.lower()
        if name in _DATE_FIELDS:
            field_name, operators = _DATE_FIELDS[name], (">=", ">", "<=", "<")
        elif name == "project":
            field_name, operators = "project", ("=", "!=", "in", "not in")
        elif name in _KEY_FIELDS:
            field_name = "id" if name == "id" else "key"
            operators = (
                ("=", "!=", "in", "not in", ">", ">=", "<", "<=") if name == "id" else ("=", "!=", "in", "not in")
            )
        else:
            raise self.error(f"Field '{token.value}' is not supported by the emulator.")
        op_token = self.take("an operator")
        if op_token.kind == "op":
            op = op_token.value
        elif op_token.is_word("in"):
            op = "in"
        elif op_token.is_word("not") and self.peek() is not None and self.tokens[self.pos].is_word("in"):
            self.pos += 1
            op = "not in"
        else:
            raise self.error(f"Expecting operator but got '{op_token.value}'.")
        if op not in operators:
            raise self.error(f"The operator '{op}' is not supported by the '{token.value}' field.")
        if op in ("in", "not in"):
            opening = self.take("'('")
            if opening.kind != "punct" or opening.value != "(":
                raise self.error(f"Expecting '(' but got '{opening.value}'.")
            values = [self.value()]
            while True:
                separator = self.take("')'")
                if separator.kind == "punct" and separator.value == ")":
                    break
                if separator.kind != "punct" or separator.value != ",":
                    raise self.error(f"Expecting ',' or ')' but got '{separator.value}'.")
                values.append(self.value())
        else:
            values = [self.value()]
        return _Clause(field_name, op, values)

    def value(self) -> str:
        token = self.take("a value")
        if token.kind not in ("word", "str"):
            raise self.error(f"Expecting a value but got '{token.value}'.")
        if token.kind == "word" and self.peek() is not None and self.tokens[self.pos].value == "(":
            raise self.error(f"JQL functions such as '{token.value}()' are not supported by the emulator.")
        return token.value

    def sort_key(self) -> tuple[str, bool]:
        token = self.take("a field name")
        name = _ORDER_FIELDS.get(token.value.lower()) if token.kind in ("word", "str") else None
        if name is None:
            raise self.error(f"Ordering by '{token.value}' is not supported by the emulator.")
        descending = False
        nxt = self.peek()
        if nxt is not None and nxt.is_word("asc", "desc"):
            self.pos += 1
            descending = nxt.value.lower() == "desc"
        return name, descending


def parse_jql_date(value: str, field_name: str, timezone: str, now: datetime | None = None) -> datetime:
    """A JQL date literal as an instant: ``yyyy-MM-dd HH:mm``, ``yyyy/MM/dd HH:mm``, ``yyyy-MM-dd`` or
    ``yyyy/MM/dd`` in the user's ``timezone`` (minute precision, like Jira), or a period such as ``-5d``/``-4w 2d``
    (``w``/``d``/``h``/``m``) relative to ``now``."""
    text = value.strip()
    for fmt in _DATE_FORMATS:
        try:
            naive = datetime.strptime(text, fmt)
        except ValueError:
            continue
        return naive.replace(tzinfo=ZoneInfo(timezone)).astimezone(UTC)
    period = _PERIOD_RE.match(text)
    if period:
        units = {"w": 604800, "d": 86400, "h": 3600, "m": 60}
        seconds = sum(int(n) * units[u] for n, u in re.findall(r"(\d+)\s*([wdhm])", period.group(2)))
        sign = -1 if period.group(1) == "-" else 1
        return (now or datetime.now(UTC)) + timedelta(seconds=sign * seconds)
    raise JqlError(
        f"Date value '{value}' for field '{field_name}' is invalid. Valid formats include: 'yyyy/MM/dd HH:mm', "
        "'yyyy-MM-dd HH:mm', 'yyyy/MM/dd', 'yyyy-MM-dd', or a period format e.g. '-5d', '4w 2d'."
    )


def _compare(left: Any, op: str, right: Any) -> bool:
    if op == "=":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if op == ">":
        return bool(left > right)
    if op == ">=":
        return bool(left >= right)
    if op == "<":
        return bool(left < right)
    return bool(left <= right)


def compile_jql(jql: str, site: JiraSite) -> tuple[Callable[[dict[str, Any]], bool], list[tuple[str, bool]], bool]:
    """Parse ``jql`` against ``site``: a predicate over stored issues, the ORDER BY keys, and whether the query has a
    search restriction (is bounded). Raises :class:`JqlError` (a 400) for unsupported or invalid queries."""
    parsed = _Parser(jql).parse()
    predicates: list[Callable[[dict[str, Any]], bool]] = []
    for clause in parsed.clauses:
        predicates.append(_clause_predicate(clause, site))

    def matches(issue: dict[str, Any]) -> bool:
        return all(p(issue) for p in predicates)

    return matches, parsed.order, bool(parsed.clauses)


def _clause_predicate(clause: _Clause, site: JiraSite) -> Callable[[dict[str, Any]], bool]:
    op = clause.op
    if clause.field == "project":
        keys: set[str] = set()
        for value in clause.values:
            project = site.project(value)
            if project is None or not project.searchable:
                raise JqlError(f"The value '{value}' does not exist for the field 'project'.")
            keys.add(project.key)
        negate = op in ("!=", "not in")
        return lambda issue: (issue["fields"]["project"]["key"] in keys) != negate
    if clause.field in ("updated", "created"):
        name = clause.field
        bound = parse_jql_date(clause.values[0], name, site.user_timezone)

        def date_matches(issue: dict[str, Any]) -> bool:
            instant = _instant(issue["fields"].get(name))
            return instant is not None and _compare(instant, op, bound)

        return date_matches
    if clause.field == "id":
        try:
            numbers = [int(v) for v in clause.values]
        except ValueError:
            raise JqlError(f"The value '{clause.values[0]}' is not a valid issue id for field 'id'.") from None
        if op in ("in", "not in"):
            wanted = {str(n) for n in numbers}
            return lambda issue: (issue["id"] in wanted) != (op == "not in")
        return lambda issue: issue["id"].isdigit() and _compare(int(issue["id"]), op, numbers[0])
    # key: every key must exist (current or former key of a moved issue) and be searchable, like Jira.
    ids: set[str] = set()
    for value in clause.values:
        if not _KEY_RE.match(value.upper()) and not value.isdigit():
            raise JqlError(f"The issue key '{value}' for field 'key' is invalid.")
        issue = site.issue(value)
        project = site.issue_project(issue) if issue is not None else None
        if issue is None or project is None or not project.searchable:
            raise JqlError(f"An issue with key '{value}' does not exist for field 'key'.")
        ids.add(issue["id"])
    return lambda issue: (issue["id"] in ids) != (op in ("!=", "not in"))


def _sort_issues(issues: list[dict[str, Any]], order: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    epoch = datetime.min.replace(tzinfo=UTC)

    def sort_value(issue: dict[str, Any], name: str) -> Any:
        if name in ("updated", "created"):
            return _instant(issue["fields"].get(name)) or epoch
        if name == "key":
            return _key_sort(issue["key"])
        return _id_sort(issue["id"])

    result = sorted(issues, key=lambda i: _id_sort(i["id"]))  # the final tie-break
    for name, descending in reversed(order or [("created", True)]):
        result.sort(key=lambda i, n=name: sort_value(i, n), reverse=descending)
    return result


# -- the emulator -----------------------------------------------------------------------------------------------------


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
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []  # tracebacks of handler crashes (answered 500)
        self._faults: list[_Fault] = []
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
        ]

    # -- lifecycle ------------------------------------------------------------------------------------------------

    thread_name = "jira-emulator"
    server_name = "JiraEmulator/1.0"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (only once started)."""
        return self.origin

    # -- faults and recording -------------------------------------------------------------------------------------

    def inject(self, kind: str, *, path: str | None = None, times: int = 1, retry_after: float = 0) -> None:
        """Make the next ``times`` requests (whose path contains ``path`` if given, else any) fail: ``"429"`` (with
        ``Retry-After``: ``retry_after`` rounded up to whole seconds), ``"500"``/``"503"``, ``"401"``/``"403"``/
        ``"404"`` (JSON ``errorMessages``), or ``"drop"`` (socket closed without a response). Injections queue up;
        a request takes the first pending one that matches it."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
        if times < 1:
            raise ValueError("times must be >= 1")
        if retry_after < 0:
            raise ValueError("retry_after must be >= 0")
        with self._record_lock:
            self._faults.append(_Fault(kind, path, times, retry_after))

    def clear_faults(self) -> None:
        """Forget every pending injected fault."""
        with self._record_lock:
            self._faults.clear()

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

    def _take_fault(self, path: str) -> _Fault | None:
        with self._record_lock:
            for fault in self._faults:
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

        fault = self._take_fault(path)
        if fault is not None:
            if fault.kind == "drop":
                request.close_connection = True
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

    def _authenticate(self, header: str | None) -> tuple[str, bool]:
        if not header:
            return "none", False
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "basic":
            try:
                user, _, secret = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return "basic:", False
            return f"basic:{user}", user == self.username and secret == self.api_token
        if scheme.lower() == "bearer":
            return "bearer", not self.cloud and credentials.strip() == self.personal_access_token
        return "none", False

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
        return _sort_issues(found, order)

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
        page = found[start : start + limit]
        return {
            "expand": "schema,names",
            "startAt": start,
            "maxResults": limit,
            "total": len(found),
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
        page = found[start : start + limit]
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
        comments = _sorted_comments(issue)
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
        for comment in _sorted_comments(issue):
            if str(comment.get("id")) == comment_id:
                return self.site.render_comment(issue["id"], comment, call.version, base_url=self.url)
        raise _ApiError(404, f"Can not find a comment for the id: {comment_id}.")


# -- module helpers ---------------------------------------------------------------------------------------------------


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
