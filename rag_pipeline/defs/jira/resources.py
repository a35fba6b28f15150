"""Where Jira issues come from: the live REST API (``JiraResource``) or a dump (offline).

Both implement :class:`JiraSourceResource`, so ``jira_issues`` and everything downstream is one
graph whichever source feeds it.
"""

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import dagster as dg
from pydantic import Field

from rag_pipeline.connectors.jira import directory as jira_directory
from rag_pipeline.connectors.jira.api import JiraAccessError, JiraApiReader, JiraSyncSettings, JiraTimeoutError
from rag_pipeline.connectors.jira.client import build_jira_client
from rag_pipeline.connectors.jira.csv_export import JiraCsvReader
from rag_pipeline.connectors.jira.dump import JiraDumpReader, JiraRead, read_comment_visibility
from rag_pipeline.connectors.jira.identity import JiraIdentity, jira_sites, resolve_jira_identity
from rag_pipeline.connectors.jira.settings import (
    BUNDLED_COMMENT_VISIBILITY,
    BUNDLED_JIRA_DUMP,
    DEFAULT_JIRA_CSV_DATE_FORMAT,
)
from rag_pipeline.defs.api_resource_kit import LiveApiResource, LiveRead, atlassian_client_options, sync_settings_of
from rag_pipeline.defs.chain.offline import WholeFileRead, file_version
from rag_pipeline.directory.accounts import DirectorySnapshot
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.sources.paging import DEFAULT_PAGE_CAP
from rag_pipeline.sources.source_read import SourceRead

JIRA_API_POOL = "jira_api"


class JiraSourceResource(dg.ConfigurableResource):
    """A source of Jira issue documents for (day, project) partitions."""

    def read_partitions(
        self, days_by_project: Mapping[str, Sequence[str]], log: Callable[[str], None] | None = None
    ) -> SourceRead:
        raise NotImplementedError


class JiraResource(LiveApiResource, JiraSourceResource):
    """The Jira REST API through atlassian-python-api (Cloud: e-mail + API token; Server/DC: a PAT)."""

    url: str = Field(description="Site URL (JIRA_URL), e.g. https://your-team.atlassian.net")
    cloud: bool = Field(default=True, description="Jira Cloud (REST v3, /search/jql) or Server/Data Center (REST v2)")
    username: str | None = Field(default=None, description="Account e-mail for Cloud API tokens (JIRA_USERNAME)")
    api_token: str | None = Field(default=None, description="Cloud API token; set it with EnvVar('JIRA_API_TOKEN')")
    personal_access_token: str | None = Field(
        default=None, description="Server/Data Center personal access token; set it with EnvVar('JIRA_PAT')"
    )
    site: str | None = Field(
        default=None, description="Site name in document ids and ACL groups (default: the URL's host)"
    )
    page_size: int = Field(default=100, description="Issues per search page")
    id_page_size: int = Field(default=1000, description="Issue ids per page in reconciliation listings")
    comment_page_size: int = Field(default=100, description="Comments per page past those the search embeds")
    overlap_minutes: int = Field(
        default=15, description="Minutes before the first day re-read (eventually consistent search)"
    )
    project_allow: list[str] = Field(default_factory=list, description="Project keys/regexes to keep (empty: all)")
    project_deny: list[str] = Field(default_factory=list, description="Project keys/regexes to skip")
    include_archived: bool = Field(default=False, description="Discover archived projects too")
    resolve_permission_groups: bool = Field(
        default=False, description="Add the groups/users of the project's Browse permission to issue ACLs"
    )
    max_retries: int = Field(
        default=8, description="Retries per request on 429 (Retry-After), 5xx and dropped connections"
    )
    backoff_seconds: float = Field(default=1.0, description="Exponential backoff factor when no Retry-After is given")
    timeout_seconds: int = Field(
        default=30,
        description="Connect and read timeout of each request, and its total deadline (RAG_API_TIMEOUT_SECONDS)",
    )
    page_cap: int = Field(default=DEFAULT_PAGE_CAP, description="Pages per paged call (RAG_API_PAGE_CAP)")
    requests_per_partition: int = Field(
        default=5_000, description="Requests a project's read may make per day it covers (RAG_API_REQUEST_BUDGET)"
    )
    seconds_per_partition: int = Field(
        default=3_600, description="Seconds a project's read may take per day it covers (RAG_API_SECONDS_BUDGET)"
    )

    def sync_settings(self) -> JiraSyncSettings:
        return sync_settings_of(self, JiraSyncSettings)

    def read_directory(
        self, log: Callable[[str], None] | None = None, previous: DirectoryStore | None = None
    ) -> DirectorySnapshot:
        """Groups and their members, the Browse projects grants and the security levels' members, from the API."""
        return jira_directory.read_api_directory(self.reader(log))

    def reader(self, log: Callable[[str], None] | None = None) -> JiraApiReader:
        """A fresh reader (with its own caches and call counters) for one run."""
        client = build_jira_client(self.url, **atlassian_client_options(self, self.backoff_seconds))
        return JiraApiReader(client, self.sync_settings(), log)

    def live_read(self) -> LiveRead:
        mode = "cloud" if self.cloud else "server"
        shown = {"overlap_minutes": self.overlap_minutes, "page_size": self.page_size, "jira_mode": mode}
        return LiveRead(JiraAccessError, ("issues_fetched", "comment_pages"), JiraTimeoutError, shown)


class JiraDumpResource(WholeFileRead, JiraSourceResource):
    """An offline Jira dump (JSON lines of REST issue objects, optionally gzipped). Its site comes from the
    issues' ``self`` URLs, else from ``site`` (JIRA_SITE); a read fails naming the flag when neither says."""

    path: str
    site: str | None = Field(default=None, description="Jira site host where the dump names none")
    directory_file: str | None = Field(
        default=None, description="CSV of Jira accounts and groups for a dump without membership (RAG_JIRA_DIRECTORY)"
    )

    def read_directory(
        self, log: Callable[[str], None] | None = None, previous: DirectoryStore | None = None
    ) -> DirectorySnapshot:
        """The people the dump names (reporters, assignees, commenters), plus the directory file where given."""
        return jira_directory.read_dump_directory(self.path, self.identity().site, self.directory_file)

    def input_paths(self) -> list[str]:
        return [self.path]

    def identity(self) -> JiraIdentity:
        return _dump_identity(self.path, self.site, file_version(self.path))

    def read(self) -> JiraRead:
        return _read_jira(self.path, self.identity().site, file_version(self.path))


class JiraCsvResource(WholeFileRead, JiraSourceResource):
    """Jira's own CSV export ("Export → CSV (all fields)"), one or more files read as one. The CSV carries no
    site URL, so ``site`` (JIRA_SITE, --jira-site) is required; dates are in the instance's display format."""

    paths: list[str]
    site: str | None = Field(default=None, description="Jira site host (the CSV names none), e.g. jira.acme.com")
    directory_file: str | None = Field(
        default=None, description="CSV of Jira accounts and groups (RAG_JIRA_DIRECTORY): a CSV export names no groups"
    )
    date_format: str = Field(
        default=DEFAULT_JIRA_CSV_DATE_FORMAT, description="strptime formats of dates, '|'-separated"
    )
    delimiter: str = Field(default=",", description="field separator of the CSV files")

    def read_directory(
        self, log: Callable[[str], None] | None = None, previous: DirectoryStore | None = None
    ) -> DirectorySnapshot:
        """The accounts of the directory file where given (a CSV export holds no membership)."""
        site = self.identity().site
        snapshot = DirectorySnapshot("jira", site, time.time())
        if self.directory_file:
            jira_directory.read_directory_file(self.directory_file, site, snapshot)
        return snapshot

    @property
    def path(self) -> str:
        """The first file (what the demo's fingerprint and messages name)."""
        return self.paths[0]

    def input_paths(self) -> list[str]:
        return list(self.paths)

    def identity(self) -> JiraIdentity:
        return resolve_jira_identity(Counter(), self.site, f"Jira CSV export {', '.join(self.paths)}")

    def read(self) -> JiraRead:
        versions = tuple(file_version(p) for p in self.paths)
        return _read_jira_csv(tuple(self.paths), self.identity().site, self.date_format, self.delimiter, versions)


@lru_cache(maxsize=2)
def _read_jira_csv(
    paths: tuple[str, ...], site: str, date_format: str, delimiter: str, _versions: tuple[float, ...]
) -> JiraRead:
    return JiraCsvReader(list(paths), site, date_format=date_format.split("|"), delimiter=delimiter).read()


@lru_cache(maxsize=4)
def _dump_identity(path: str, site: str | None, _mtime: float) -> JiraIdentity:
    return resolve_jira_identity(jira_sites(path), site, f"Jira dump {path}")


@lru_cache(maxsize=2)
def _read_jira(path: str, site: str, _mtime: float) -> JiraRead:
    # The bundled dump is read with its overlay of restricted comments (sources/jira/settings.py).
    bundled = Path(path).resolve() == BUNDLED_JIRA_DUMP.resolve()
    overlay = read_comment_visibility(BUNDLED_COMMENT_VISIBILITY) if bundled else None
    return JiraDumpReader(path, site, comment_visibility=overlay).read()
