"""Where Confluence pages come from: the live REST API (``ConfluenceResource``) or a dump of REST content objects
(offline, ``ConfluenceDumpResource``); both feed ``confluence_pages`` and everything downstream."""

from collections.abc import Callable
from functools import lru_cache

import dagster as dg
from pydantic import Field

from rag_pipeline.connectors.confluence import directory as confluence_directory
from rag_pipeline.connectors.confluence.api import (
    ConfluenceAccessError,
    ConfluenceApiReader,
    ConfluenceSyncSettings,
    ConfluenceTimeoutError,
)
from rag_pipeline.connectors.confluence.client import build_confluence_client
from rag_pipeline.connectors.confluence.dump import ConfluenceDumpReader, ConfluenceRead
from rag_pipeline.connectors.confluence.identity import (
    ConfluenceIdentity,
    confluence_sites,
    resolve_confluence_identity,
)
from rag_pipeline.defs.api_resource_kit import LiveApiResource, LiveRead, atlassian_client_options, sync_settings_of
from rag_pipeline.defs.chain.offline import WholeFileRead, file_version
from rag_pipeline.directory.accounts import DirectorySnapshot
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.sources.paging import DEFAULT_PAGE_CAP

CONFLUENCE_API_POOL = "confluence_api"


class ConfluenceResource(LiveApiResource, dg.ConfigurableResource):
    """The Confluence REST API through atlassian-python-api (Cloud: e-mail + API token; Data Center: a PAT)."""

    url: str = Field(description="Site URL (CONFLUENCE_URL), e.g. https://your-team.atlassian.net/wiki")
    cloud: bool = Field(default=True, description="Confluence Cloud or Data Center")
    username: str | None = Field(default=None, description="Account e-mail for Cloud API tokens (CONFLUENCE_USERNAME)")
    api_token: str | None = Field(default=None, description="Cloud API token; EnvVar('CONFLUENCE_API_TOKEN')")
    personal_access_token: str | None = Field(default=None, description="Data Center PAT; EnvVar('CONFLUENCE_PAT')")
    site: str | None = Field(default=None, description="Site name in ids and ACL groups (default: the URL's host)")
    page_size: int = Field(default=50, description="Pages per search page (with bodies)")
    overlap_minutes: int = Field(default=15, description="Minutes before the first day re-read")
    space_allow: list[str] = Field(default_factory=list, description="Space keys/regexes to keep (empty: all)")
    space_deny: list[str] = Field(default_factory=list, description="Space keys/regexes to skip")
    max_retries: int = Field(default=8, description="Retries per request on 429 (Retry-After), 5xx, dropped links")
    timeout_seconds: int = Field(default=30, description="Deadline of each request (RAG_API_TIMEOUT_SECONDS)")
    page_cap: int = Field(default=DEFAULT_PAGE_CAP, description="Pages per paged call (RAG_API_PAGE_CAP)")
    requests_per_partition: int | None = Field(default=5_000, description="Requests a space's read may make per day")
    seconds_per_partition: int | None = Field(default=3_600, description="Seconds a space's read may take per day")

    def sync_settings(self) -> ConfluenceSyncSettings:
        return sync_settings_of(self, ConfluenceSyncSettings)

    def reader(self, log: Callable[[str], None] | None = None) -> ConfluenceApiReader:
        """A fresh reader (its own caches and call counters) for one run."""
        client = build_confluence_client(self.url, **atlassian_client_options(self))
        return ConfluenceApiReader(client, self.sync_settings(), log)

    def read_directory(
        self, log: Callable[[str], None] | None = None, previous: DirectoryStore | None = None
    ) -> DirectorySnapshot:
        """Users, groups, space view grants and restricted chains from the API; a space or group that cannot be read
        keeps the holds ``previous`` recorded for it (one failed read never revokes or grants)."""
        reader = self.reader(log)
        kept = previous.accounts("confluence", reader.site) if previous is not None else None
        return confluence_directory.read_api_directory(reader, previous=kept)

    def live_read(self) -> LiveRead:
        mode = "cloud" if self.cloud else "data center"
        shown = {"overlap_minutes": self.overlap_minutes, "page_size": self.page_size, "confluence_mode": mode}
        return LiveRead(ConfluenceAccessError, ("pages_fetched", "comment_pages"), ConfluenceTimeoutError, shown)


class ConfluenceDumpResource(WholeFileRead, dg.ConfigurableResource):
    """An offline dump of Confluence REST content objects (JSON lines, .gz or not); none configured: no pages. Its
    site comes from the objects' ``_links.base``, else from ``site`` (CONFLUENCE_SITE)."""

    path: str = Field(default="", description="The dump (RAG_CONFLUENCE_DUMP); empty: Confluence is not read")
    site: str | None = Field(default=None, description="Site host where the dump names none")
    directory_file: str | None = Field(
        default=None, description="CSV of accounts and groups (RAG_CONFLUENCE_DIRECTORY)"
    )

    def input_paths(self) -> list[str]:
        return [self.path] if self.path else []

    def identity(self) -> ConfluenceIdentity:
        if not self.path:
            # Nothing to index claims no site: a later dump of any site may be indexed into this folder.
            return ConfluenceIdentity("")
        return _dump_identity(self.path, self.site, file_version(self.path))

    def read(self) -> ConfluenceRead:
        if not self.path:
            return ConfluenceRead()
        return _read_confluence(self.path, self.identity().site, file_version(self.path))

    def read_directory(
        self, log: Callable[[str], None] | None = None, previous: DirectoryStore | None = None
    ) -> DirectorySnapshot:
        """The people and grants the dump holds, resolved through the directory file where given."""
        site = self.identity().site
        if not self.path:
            return DirectorySnapshot("confluence", site or "none", 0.0)
        return confluence_directory.read_dump_directory(self.path, site, self.directory_file)


@lru_cache(maxsize=4)
def _dump_identity(path: str, site: str | None, _mtime: float) -> ConfluenceIdentity:
    return resolve_confluence_identity(confluence_sites(path), site, path)


# A backfill runs many steps in one process; parse the dump once per version of it.
@lru_cache(maxsize=2)
def _read_confluence(path: str, site: str, _mtime: float) -> ConfluenceRead:
    return ConfluenceDumpReader(path, site).read()
