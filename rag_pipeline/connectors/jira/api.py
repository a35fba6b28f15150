"""Jira REST reader: project discovery, (day x project) issue reads, id listings for reconciliation
and project ACLs, through atlassian-python-api's ``Jira`` client.

A (day D, project P) read returns every issue of P whose ``updated`` lies in [D, D+1) UTC. JQL
dates have minute precision and are read in the API user's time zone, so the reader asks Jira for
that zone (``myself``), writes the UTC bounds as that zone's wall clock, and still filters the
returned ``updated`` instants exactly: a boundary issue lands in exactly one day whatever the
user's zone. Cloud search (``/rest/api/3/search/jql``) is eventually consistent, so the window
starts ``overlap_minutes`` early; issues found in the overlap go to the run's first day (their
version decides what the index keeps). Issues come with all their comments (paged past what the
search embeds) and are built by the dump reader's :func:`issue_to_document`, so both readers give
identical documents for the same issues.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from atlassian import Jira
from pydantic import Field

from rag_pipeline.connectors.atlassian.reader import AtlassianReader, AtlassianSyncSettings, ProductWords
from rag_pipeline.connectors.atlassian.reads import ContainerRead, DayWindow, ListedContainer, NewestVersions
from rag_pipeline.connectors.jira.client import endpoint_of
from rag_pipeline.connectors.jira.dump import (
    issue_document_id,
    issue_to_documents,
    jira_group,
    parse_jira_time,
    project_group,
    role_actors,
    with_family_acl,
)
from rag_pipeline.sources.document import Acl, Document
from rag_pipeline.sources.problems import RecordProblem, SourceError

# What issue_to_document reads; anything else would only cost bandwidth.
ISSUE_FIELDS = (
    "summary",
    "description",
    "comment",
    "reporter",
    "creator",
    "created",
    "updated",
    "project",
    "issuetype",
    "status",
    "resolution",
    "labels",
    "components",
    "issuelinks",
    "security",
)
# Jira's own limit on project names; a longer "name" in a listing is not a name worth showing whole.
MAX_PROJECT_NAME_LENGTH = 80
# JQL's date format: minute precision, in the API user's time zone.
JQL_TIME = "%Y-%m-%d %H:%M"
WORDS = ProductWords(
    name="Jira", container="project", server="Server/Data Center", see="browse", grant="grant it Browse projects there"
)


class JiraSyncSettings(AtlassianSyncSettings):
    """How the live connector reads a Jira site (the shared fields: :class:`AtlassianSyncSettings`; Cloud searches
    ``/search/jql`` with ADF bodies, Server/Data Center ``/search`` with wiki markup)."""

    page_size: int = Field(100, ge=1, le=5000, description="Issues per search page (with full fields)")
    id_page_size: int = Field(1000, ge=1, le=5000, description="Issue ids per page in reconciliation listings")
    comment_page_size: int = Field(100, ge=1, le=5000, description="Comments per page past those search embeds")
    project_allow: tuple[str, ...] = Field((), description="Project keys or regexes to keep (empty: all)")
    project_deny: tuple[str, ...] = Field((), description="Project keys or regexes to skip")
    resolve_permission_groups: bool = Field(
        False,
        description="Add the concrete groups and users of the project's Browse permission (permission scheme and "
        "project roles) to each issue's ACL, next to the project group",
    )

    def wants(self, project: JiraProject) -> bool:
        """Whether discovery keeps a project (deny wins over allow)."""
        return self._wanted(project, self.project_allow, self.project_deny)


@dataclass(frozen=True)
class JiraProject(ListedContainer):
    """A project as the listing shows it."""


class JiraAccessError(SourceError):
    """The site or one project cannot be read; the message says what to change."""


class JiraTimeoutError(JiraAccessError):
    """A call got no complete answer within the timeout or deadline, after every retry (a silent or trickling
    server); told apart so the run's metadata can name the timeout as what stopped the project."""


@dataclass
class ProjectDiscovery:
    """What project discovery found: the projects to read and listings left out because their key cannot be a
    partition key."""

    projects: list[JiraProject] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)


@dataclass
class ProjectRead(ContainerRead):
    """Issues of one project for a set of days, and where each belongs."""

    issues_fetched: int = 0


class JiraApiReader(AtlassianReader[JiraSyncSettings]):
    """Reads a Jira site through the client; one instance per run (it caches the zone and ACLs)."""

    client: Jira
    words = WORDS
    query_time = JQL_TIME
    access_error = JiraAccessError
    timeout_error = JiraTimeoutError

    def _start_caches(self) -> None:
        # Project ACLs resolved in this run; an unreadable permission scheme is never cached (the next read asks
        # again), only remembered for the read in progress (_acl_failures) so its issues do not each ask.
        self._acls: dict[str, Acl] = {}
        self._acl_failures: dict[str, str] = {}
        # What the permission-scheme resolution left out or could not read, per project (reported by each read).
        self.acl_problems: dict[str, list[RecordProblem]] = {}

    def endpoint_of(self, path: str) -> str:
        return endpoint_of(path)

    def special_error(self, status: int | None, target: str, path: str, message: str) -> str | None:
        """Jira's own advice: Cloud's removed search endpoint, and a project JQL cannot see."""
        if status == 410:
            return (
                f"Jira 410: the endpoint {path or '?'} was removed ({message}); Jira Cloud search must use "
                "/rest/api/3/search/jql: set cloud=true (JIRA_CLOUD=1)"
            )
        if status == 400 and "does not exist for the field 'project'" in message:
            return f"Jira 400: {target} does not exist or the API user cannot browse it ({message})"
        return None

    @property
    def api_version(self) -> str:
        return "3" if self.settings.cloud else "2"

    @property
    def rest_root(self) -> str:
        return f"/rest/api/{self.api_version}"

    def _get(self, what: str, where: str | None, resource: str, missing_ok: bool = False, **params: Any) -> Any:
        path = f"rest/api/{self.api_version}/{resource}"
        return self._call(what, where, self.client.get, path, missing_ok=missing_ok, params=params)

    def get(self, what: str, where: str | None, resource: str, missing_ok: bool = False, **params: Any) -> Any:
        """One GET of ``/rest/api/<version>/<resource>`` with the reader's error handling (the directory sync)."""
        return self._get(what, where, resource, missing_ok, **params)

    def paged(self, what: str, where: str | None, resource: str, page_size: int = 50, **params: Any) -> Iterator[Any]:
        """The ``values`` of a ``startAt``/``maxResults`` paged resource (``group/member``, ``group/bulk``,
        security level members) until ``isLast`` (or ``total``), under one page guard."""
        guard = self._guard(resource, where)
        start = 0
        while True:
            page = self._get(what, where, resource, **params, startAt=start, maxResults=page_size) or {}
            values = page.get("values") or []
            yield from values
            start += len(values)
            total, is_last = page.get("total"), page.get("isLast")
            if isinstance(is_last, bool):
                last = is_last
            elif isinstance(total, int):
                last = start >= total
            else:
                last = not values  # a page that promises nothing: an empty one ends the listing
            # An empty page that still promises more (isLast false, total not reached) is not the end: the guard
            # (no empty pages allowed) trips and the listing fails, instead of ending short and dropping members.
            guard.page(len(values), None if last else f"startAt={start} (total {total}, isLast {is_last})")
            if last:
                return

    # --- site -----------------------------------------------------------------------------------
    def _profile(self) -> Any:
        return self._get("read the API user's profile", None, "myself")

    def discover_projects(self) -> list[JiraProject]:
        """Projects the API user can browse, minus archived ones and the allow/deny filters (see :meth:`discover`
        for the listings left out)."""
        return self.discover().projects

    def discover(self) -> ProjectDiscovery:
        """Projects the API user can browse, minus archived ones and the allow/deny filters; a listing whose key
        cannot be a partition key is a problem, never a project."""
        if self.settings.cloud:
            listed: Iterable[dict[str, Any]] = self._cloud_projects()
        else:
            listed = self._call(
                "list projects", None, self.client.get_all_projects, included_archived=self.settings.include_archived
            )
        out = ProjectDiscovery()
        for number, p in enumerate(listed or [], start=1):
            found = self._listed(p, number, MAX_PROJECT_NAME_LENGTH, out.problems)
            if found is None:
                continue
            key, name = found
            project = JiraProject(key, str(p.get("id", "")), name, bool(p.get("archived")))
            if self.settings.wants(project):
                out.projects.append(project)
        return out

    def _cloud_projects(self) -> Iterator[dict[str, Any]]:
        """Cloud's paged ``project/search``. It ignores ``includeArchived`` (what the client's
        ``get_all_projects`` sends) and filters by ``status`` instead, so the pages are followed here."""
        params: dict[str, Any] = {"maxResults": 50}
        if self.settings.include_archived:
            params["status"] = ["live", "archived"]
        url, absolute = "rest/api/3/project/search", False
        guard = self._guard("project/search", "the project listing")
        while True:
            page = self._call("list projects", None, self.client.get, url, params=params, absolute=absolute) or {}
            values = page.get("values") or []
            yield from values
            last = page.get("isLast", True) or not page.get("nextPage")
            guard.page(len(values), None if last else str(page["nextPage"]))
            if last:
                return
            url, params, absolute = page["nextPage"], {}, True

    # --- search -----------------------------------------------------------------------------------
    def search(
        self, jql: str, fields: Iterable[str], page_size: int, where: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every issue a JQL query matches: Cloud pages with nextPageToken until isLast, Server/DC
        with startAt until total. A cursor that cannot make progress (a repeated token, a startAt the server
        ignores, an empty page that promises more) or more than ``page_cap`` pages raises :class:`GuardTripped`."""
        fields = list(fields)
        if self.settings.cloud:
            guard = self._guard("search/jql", where)
            token: str | None = None
            while True:
                page = self._call(
                    "search issues", where, self.client.enhanced_jql, jql, fields=fields, nextPageToken=token,
                    limit=page_size,
                )  # fmt: skip
                issues = page.get("issues") or []
                yield from issues
                token = page.get("nextPageToken")
                last = page.get("isLast", not token) or not token
                guard.page(len(issues), None if last else token)
                if last:
                    return
        guard = self._guard("search", where)
        start = 0
        while True:
            page = self._call("search issues", where, self.client.jql, jql, fields=fields, start=start, limit=page_size)
            issues = page.get("issues") or []
            yield from issues
            # Jira echoes the startAt it served; a server (or proxy) that ignores ours answers 0 again.
            served = int(page.get("startAt", start))
            next_start = served + len(issues)
            if next_start >= int(page.get("total", 0)):
                guard.page(len(issues), None)
                return
            if issues:
                guard.offset(len(issues), start, next_start)
            else:
                # An empty page short of total: the rest can never be read, so the listing is incomplete.
                guard.page(0, f"startAt={start} (empty page, total {page.get('total')})")
            start = next_start

    def _window_jql(self, project: str, start: datetime, end: datetime) -> str:
        after, before = self._query_bounds(start, end)
        return f'project = "{project}" AND updated >= "{after}" AND updated < "{before}" ORDER BY updated ASC, key ASC'

    # --- issues -----------------------------------------------------------------------------------
    def read_days(self, project: str, days: Iterable[str]) -> ProjectRead:
        """Issues of a project updated on any of ``days`` (UTC, YYYY-MM-DD), plus those updated in the
        overlap before the first day (assigned to the first day)."""
        out = ProjectRead()
        window = DayWindow.covering(days, self.settings.overlap_minutes)
        if window is None:
            return out
        self._acl_failures.pop(project, None)  # a scheme unreadable in an earlier read is asked for again
        with self._budgeted(project, len(window.days)):
            return self._read_window(project, window, out)

    def _read_window(self, project: str, window: DayWindow, out: ProjectRead) -> ProjectRead:
        jql = self._window_jql(project, window.start, window.end)
        listed = list(self.search(jql, ISSUE_FIELDS, self.settings.page_size, f"project {project}"))
        if len(listed) >= self.settings.page_size:
            listed += self._skipped_by_paging(project, jql, listed)
        newest: NewestVersions[dict[str, Any]] = NewestVersions(window)
        for issue in listed:
            out.issues_fetched += 1
            try:
                updated = parse_jira_time(issue["fields"]["updated"])
            except (KeyError, TypeError, ValueError) as exc:
                out.problems.append(RecordProblem(_where(issue), f"unreadable updated: {type(exc).__name__}: {exc}"))
                continue
            newest.offer(str(issue.get("id")), updated, issue)
        for day, issue in newest.by_day():
            # The issue and its restricted comments (each its own document) go to the same partition.
            for doc in self._document(issue, out):
                out.place(doc, day)
        if self.settings.resolve_permission_groups and out.documents:
            out.problems.extend(self.acl_problems.get(project, ()))
        self._log(
            f"{project}: {len(out.documents)} issues updated on {len(window.days)} day(s) "
            f"({out.issues_fetched} listed, {out.comment_pages} extra comment pages, {len(out.problems)} unreadable)"
        )
        return out

    def _skipped_by_paging(self, project: str, jql: str, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Issues the paged read missed. Pages are positions in an `updated` order, so an issue edited
        on an earlier page moves behind the cursor and shifts an untouched one past it; an id-only
        listing of the same window (large pages) finds those, and each is fetched alone."""
        seen = {str(i.get("id")) for i in listed}
        ids = {str(i["id"]) for i in self.search(jql, ["id"], self.settings.id_page_size, f"project {project}")}
        found = []
        for issue_id in sorted(ids - seen):
            issue = self._issue(issue_id)
            if issue is not None:
                found.append(issue)
        if found:
            self._log(f"{project}: {len(found)} issue(s) moved between pages while paging; fetched them alone")
        return found

    def _issue(self, issue_id: str) -> dict[str, Any] | None:
        """One issue by id with the fields documents need (None when Jira no longer has it)."""
        fields = ",".join(ISSUE_FIELDS)
        issue: dict[str, Any] | None = self._call(
            "read an issue", f"issue {issue_id}", self.client.get_issue, issue_id, fields=fields, missing_ok=True
        )
        return issue

    def _document(self, issue: dict[str, Any], out: ProjectRead) -> list[Document]:
        """One issue as its Document with all its comments, then its restricted comments' documents; a bad issue
        body becomes a problem (no documents), not a failure. Transport errors (retries exhausted, 403...)
        propagate: a partition must not succeed without an issue it could not read."""
        try:
            issue = self._with_all_comments(issue, out)
            family = issue_to_documents(issue, self.site)
        except JiraAccessError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            out.problems.append(RecordProblem(_where(issue), f"{type(exc).__name__}: {exc}"))
            return []
        if "security" not in issue["fields"]:
            # The reader asks for `security` by name; Jira answers null for an issue without a level. An answer
            # without the field (hidden by a field configuration, a proxy, a partial payload) cannot say whether
            # the issue is restricted: it is written readable by nobody, never by the project, and reported. The
            # next read of the issue (its next update, a backfill) writes it with its real ACL.
            out.problems.append(
                RecordProblem(
                    _where(issue),
                    "Jira's answer has no security field (asked for): whether the issue has a security level is "
                    "unknown, so it is indexed readable by nobody; make the Security Level field visible to the "
                    "API user",
                )
            )
            return with_family_acl(family, Acl())
        return self._with_project_acl(family, issue, out)

    def _with_all_comments(self, issue: dict[str, Any], out: ProjectRead) -> dict[str, Any]:
        embedded = issue["fields"].get("comment") or {}
        comments = list(embedded.get("comments") or [])
        total = int(embedded.get("total") or len(comments))
        if total <= len(comments):
            return issue
        # Pages are positions too: a comment deleted or added mid-read shifts the rest, so a read
        # whose total moved, or that came up short, is read once more.
        for _attempt in range(2):
            by_id, first_total, start = self._comment_pages(issue, out)
            if len(by_id) == first_total == start:
                break
        comments = list(by_id.values())
        fields = {**issue["fields"], "comment": {"comments": comments, "total": len(comments), "startAt": 0,
                                                 "maxResults": len(comments)}}  # fmt: skip
        return {**issue, "fields": fields}

    def _comment_pages(self, issue: dict[str, Any], out: ProjectRead) -> tuple[dict[str, Any], int, int]:
        """Every comment page of an issue: comments by id (in order), the first page's total, and how
        far the pages reached."""
        by_id: dict[str, Any] = {}
        first_total: int | None = None
        start = total = 0
        guard = self._guard("issue/{issue}/comment", f"issue {issue.get('key')}")
        while first_total is None or start < total:
            page = self._get(
                "read comments",
                f"issue {issue.get('key')}",
                f"issue/{issue['id']}/comment",
                startAt=start,
                maxResults=self.settings.comment_page_size,
                orderBy="created",
            )
            out.comment_pages += 1
            total = int(page.get("total") or 0)
            first_total = total if first_total is None else first_total
            batch = page.get("comments") or []
            for comment in batch:
                by_id.setdefault(str(comment.get("id")), comment)
            if not batch:
                # Comments deleted mid-read leave the pages short of the first total: the caller re-reads once.
                break
            next_start = int(page.get("startAt", start)) + len(batch)
            guard.offset(len(batch), start, next_start)
            start = next_start
        if total != first_total:
            start = -1  # the total moved while paging
        return by_id, first_total or 0, start

    def issue_document(self, issue_id: str) -> Document | None:
        """The current document of one issue by id (None when Jira no longer has it). An issue whose answer lacks
        its security field is a JiraAccessError: reconciliation fails the project and tries again next time rather
        than rewrite the issue with an ACL it cannot know."""
        issue = self._issue(issue_id)
        if issue is None:
            return None
        out = ProjectRead()
        family = self._document(issue, out)
        if out.problems and (not family or "security" not in issue["fields"]):
            raise JiraAccessError(str(out.problems[0]))
        return family[0] if family else None

    def issue_ids(self, project: str) -> set[str]:
        """Ids of every issue the project holds now (ids only, large pages), for reconciliation."""
        jql = f'project = "{project}" ORDER BY id ASC'
        with self._budgeted(project, 1):
            return {str(i["id"]) for i in self.search(jql, ["id"], self.settings.id_page_size, f"project {project}")}

    def project_exists(self, project: str) -> bool:
        """Whether the API user can still see the project (False on 404: deleted, or browse revoked)."""
        found = self._get("read a project", f"project {project}", f"project/{project}", missing_ok=True)
        return found is not None

    def document_id(self, issue_id: str) -> str:
        return issue_document_id(self.site, issue_id)

    # --- ACL ----------------------------------------------------------------------------------
    def _with_project_acl(
        self, family: list[Document], issue: Mapping[str, Any], out: ProjectRead | None = None
    ) -> list[Document]:
        if not self.settings.resolve_permission_groups or issue["fields"].get("security") is not None:
            # Issue security restricts to the level's group; the project's browsers do not all qualify.
            return family
        doc = family[0]
        acl = self.project_acl(doc.container)
        if acl is None:
            # The project group alone stays: the directory grants it only to the browsers it resolved from the scheme
            # (nobody while it cannot read the scheme either), so nobody new reads the issue. Reported once per
            # read, where the run's bad records are shown.
            if out is not None and not any(p.location == f"jira project {doc.container}" for p in out.problems):
                out.problems.append(
                    RecordProblem(
                        f"jira project {doc.container}",
                        f"permission scheme unreadable ({self._acl_failures.get(doc.container, '?')}); its issues "
                        "carry the project group alone (the browsers the directory resolved; read again next time)",
                    )
                )
            return family
        # The restricted comments keep their restriction: the project's browsers read them only with the role.
        return with_family_acl(family, acl)

    def project_acl(self, project: str) -> Acl | None:
        """Project group plus the concrete groups/users holding Browse projects (permission scheme and
        project roles); None when the scheme cannot be read (the project group alone then applies). A failure
        is remembered for the read in progress only: a later read, or a reader's next call outside a read,
        asks again. Grants this cannot resolve to people (``anyone``, ``applicationRole``, ``projectLead``,
        ``reporter``...) are left out, which only narrows the ACL, and are listed in :attr:`acl_problems`."""
        if project in self._acls:
            return self._acls[project]
        if project in self._acl_failures and self._budget is not None:
            return None
        try:
            scheme = self._get("read the permission scheme", f"project {project}",
                               f"project/{project}/permissionscheme", expand="permissions")  # fmt: skip
        except JiraAccessError as exc:
            self._log(f"{project}: permission scheme unreadable, using the project group only ({exc})")
            self._acl_failures[project] = str(exc)
            return None
        self._acl_failures.pop(project, None)
        groups, users = [project_group(self.site, project)], []
        problems: list[RecordProblem] = []
        for grant in scheme.get("permissions") or []:
            if grant.get("permission") != "BROWSE_PROJECTS":
                continue
            holder = grant.get("holder") or {}
            if holder.get("type") == "group" and holder.get("parameter"):
                groups.append(jira_group(self.site, holder["parameter"]))
            elif holder.get("type") == "projectRole" and holder.get("parameter"):
                role = self._get("read a project role", f"project {project}",
                                 f"project/{project}/role/{holder['parameter']}")  # fmt: skip
                group_names, user_ids = role_actors(role)
                groups.extend(jira_group(self.site, name) for name in group_names)
                users.extend(user_ids)
            else:
                kind = holder.get("type") or "?"
                detail = f" {holder['parameter']}" if holder.get("parameter") else ""
                problems.append(
                    RecordProblem(
                        f"jira project {project} permission scheme",
                        f"Browse projects granted to {kind}{detail} is not resolved to people; those readers do "
                        "not see its issues through this index",
                    )
                )
        acl = Acl(groups=tuple(dict.fromkeys(groups)), users=tuple(dict.fromkeys(u for u in users if u)))
        self._acls[project] = acl
        self.acl_problems[project] = problems
        return acl


def _where(issue: Mapping[str, Any]) -> str:
    return f"jira issue {issue.get('key', '?')} (id {issue.get('id', '?')})"
