"""The Jira site model behind the Jira REST emulator (:mod:`rag_pipeline_tests.kit.emulators.jira_api`).

* :class:`JiraSite`: the projects and issues of one site, mutable while an emulator serves it (add, move and delete
  issues, set fields; a moved issue still resolves by its old key), with the API user's account and timezone. Issues
  are stored as REST v2-style objects; :meth:`JiraSite.render` serves one for an API version; dumps go out and in
  with :meth:`JiraSite.write_dump` and :meth:`JiraSite.from_dump`.
* :class:`JiraProject`: identity, archived/visible flags and what the permission scheme is built from
  (``BROWSE_PROJECTS`` grants to groups and project roles, role actors).
* The directory: users by accountId (:meth:`JiraSite.add_user`), groups of accountIds (:meth:`JiraSite.add_group`,
  :meth:`JiraSite.remove_from_group`; ids from :func:`group_id`) and the levels of one issue security scheme
  (:meth:`JiraSite.add_security_level`), so who may read what can be resolved to people.
* Fields: ``security`` is served null for an issue without a level, as Jira does; :meth:`JiraSite.hide_fields`
  leaves fields out of served issues (a field hidden from the API user).
* Bodies: v2 serves wiki-text, v3 Atlassian Document Format; :func:`body_for_version` converts either way
  (:func:`adf_to_text`, :func:`text_to_adf`).
* Time: :func:`parse_jira_time` reads Jira timestamps (:func:`jira_instant`: the same, or None for a bad value).

Stdlib only.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

__all__ = [
    "KEY_RE",
    "SECURITY_SCHEME_ID",
    "SECURITY_SCHEME_NAME",
    "JiraProject",
    "JiraSite",
    "adf_to_text",
    "body_for_version",
    "group_id",
    "jira_instant",
    "parse_jira_time",
    "sorted_comments",
    "text_to_adf",
]

# Fields whose values are rich text: strings (wiki markup) in v2, ADF documents in v3.
_RICH_TEXT_FIELDS = ("description", "environment")
# System fields Jira answers whenever they are asked for, null when the issue has no value: an issue without a
# security level has ``"security": null``, and only a field hidden from the API user is left out
# (:meth:`JiraSite.hide_fields`).
_NULL_WHEN_UNSET = ("security",)
KEY_RE = re.compile(r"^([A-Z][A-Z0-9_]*)-(\d+)$")
# The site's one issue security scheme (it exists once a level is added).
SECURITY_SCHEME_ID = "10100"
SECURITY_SCHEME_NAME = "Default scheme"
_GROUP_ID_NAMESPACE = uuid.UUID("6f1c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f")


def group_id(name: str) -> str:
    """The Cloud ``groupId`` of a group: a UUID derived from its name, so it is stable across runs and sites."""
    return str(uuid.uuid5(_GROUP_ID_NAMESPACE, name))


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


def jira_instant(value: Any) -> datetime | None:
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
    # More BROWSE_PROJECTS holders served as given: {"type": "anyone"}, {"type": "applicationRole", "parameter": ...}
    other_browse_holders: list[dict[str, Any]] = field(default_factory=list)

    @property
    def searchable(self) -> bool:
        """Whether its issues can be found by JQL (visible to the API user and not archived)."""
        return self.visible and not self.archived


def sorted_comments(issue: dict[str, Any]) -> list[dict[str, Any]]:
    """The stored comments of an issue, oldest first (ties keep their stored order)."""
    comment = issue.get("fields", {}).get("comment")
    comments = [c for c in (comment.get("comments") or []) if isinstance(c, dict)] if isinstance(comment, dict) else []
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(comments, key=lambda c: jira_instant(c.get("created")) or epoch)


class JiraSite:
    """Projects, issues and the user directory of one Jira site (mutable while the emulator serves it).

    Issues are stored as REST v2-style objects (``{"id", "key", "fields": {...}}``) whose bodies may be wiki strings
    or ADF documents; the full comment list is ``fields.comment.comments``. The directory: :attr:`users` by accountId
    (``{"accountId", "displayName", "emailAddress"?, "active", "name"}``), :attr:`groups` (name -> member accountIds,
    in the order they joined) and :attr:`security_levels` (level id -> ``{"name", "description", "groups",
    "users"}``) of the one issue security scheme :data:`SECURITY_SCHEME_ID`. Mutate the site through its methods (or
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
        self.users: dict[str, dict[str, Any]] = {}  # accountId -> user
        self.groups: dict[str, list[str]] = {}  # group name -> member accountIds
        self.security_levels: dict[str, dict[str, Any]] = {}  # level id -> {"name", "description", "groups", "users"}
        # Fields left out of served issues (hide_fields): of every issue (None) or of one issue id.
        self.hidden_fields: dict[str | None, set[str]] = {}
        self.lock = threading.RLock()

    def hide_fields(self, *names: str, issue: str | None = None) -> None:
        """Leave ``names`` out of every served issue (search results, ``GET issue``, dumps), or of the issue with
        this id or key only, as Jira does for a field hidden by the field configuration or one the API user may
        not see (``security``). With no names, the issue's (or the site's) hidden fields are shown again."""
        with self.lock:
            key = None if issue is None else self._require(issue)["id"]
            if names:
                self.hidden_fields.setdefault(key, set()).update(names)
            else:
                self.hidden_fields.pop(key, None)

    # -- directory ------------------------------------------------------------------------------------------------

    def add_user(
        self,
        account_id: str,
        display_name: str,
        *,
        email: str | None = None,
        active: bool = True,
        groups: Iterable[str] = (),
        name: str | None = None,
    ) -> dict[str, Any]:
        """Add (or replace) a user and put it in ``groups`` (created when missing); returns the stored user.
        ``name`` is the Server/DC username (default: the accountId); ``emailAddress`` is stored only when given,
        as Cloud hides it for users whose profile visibility says so."""
        user: dict[str, Any] = {
            "accountId": account_id,
            "displayName": display_name,
            "active": active,
            "name": name if name is not None else account_id,
        }
        if email is not None:
            user["emailAddress"] = email
        with self.lock:
            self.users[account_id] = user
            for group in groups:
                self.add_group(group, (account_id,))
        return user

    def add_group(self, name: str, members: Iterable[str] = ()) -> None:
        """Create a group if missing and add ``members`` (accountIds of existing users; ``KeyError`` otherwise) that
        are not in it yet."""
        with self.lock:
            added = list(members)
            unknown = [m for m in added if m not in self.users]
            if unknown:
                raise KeyError(f"no users {unknown!r} to add to group {name!r}")
            current = self.groups.setdefault(name, [])
            for account_id in added:
                if account_id not in current:
                    current.append(account_id)

    def remove_from_group(self, name: str, account_id: str) -> None:
        """Take a user out of a group (``KeyError`` for an unknown group; no-op if not a member)."""
        with self.lock:
            members = self.groups[name]
            if account_id in members:
                members.remove(account_id)

    def add_security_level(
        self,
        level_id: str,
        name: str,
        *,
        groups: Iterable[str] = (),
        users: Iterable[str] = (),
        description: str = "",
    ) -> None:
        """Add (or replace) a level of the site's issue security scheme, readable by members of ``groups`` and by
        ``users`` (accountIds). Groups and users are served as named; they need not exist."""
        with self.lock:
            self.security_levels[str(level_id)] = {
                "name": name,
                "description": description,
                "groups": [str(g) for g in groups],
                "users": [str(u) for u in users],
            }

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
        if not KEY_RE.match(f"{key}-1"):
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
        if not issue_id or not KEY_RE.match(key):
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
        if not KEY_RE.match(new_key) or new_key.rpartition("-")[0] != project_key:
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
                comments = sorted_comments(issue)
                shown = comments if embed_comments is None else comments[: max(embed_comments, 0)]
                fields[name] = {
                    "comments": [self.render_comment(issue_id, c, version, base_url=base_url) for c in shown],
                    "maxResults": len(shown),
                    "total": len(comments),
                    "startAt": 0,
                }
            else:
                fields[name] = copy.deepcopy(value)
        for name in _NULL_WHEN_UNSET:
            if name not in fields and (include is None or include(name)):
                fields[name] = None
        for name in self.hidden_fields.get(None, set()) | self.hidden_fields.get(issue_id, set()):
            fields.pop(name, None)
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
