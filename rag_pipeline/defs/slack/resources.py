"""Where Slack threads come from: the live Web API (``SlackResource``) or an export (offline).

Both implement :class:`SlackSourceResource`, so ``slack_threads`` and everything downstream is one
graph whichever source feeds it.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache

import dagster as dg
from pydantic import Field

from rag_pipeline.connectors.slack import directory as slack_directory
from rag_pipeline.connectors.slack.api import (
    SlackAccessError,
    SlackApiReader,
    SlackSyncSettings,
    build_web_client,
)
from rag_pipeline.connectors.slack.export import SlackExportReader, SlackRead
from rag_pipeline.connectors.slack.identity import SlackIdentity, resolve_slack_identity
from rag_pipeline.defs.api_resource_kit import LiveApiResource, LiveRead, sync_settings_of
from rag_pipeline.defs.chain.offline import file_version
from rag_pipeline.directory.accounts import DirectorySnapshot
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.settings import operator_partition_start
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.paging import DEFAULT_PAGE_CAP
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import SourceRead
from rag_pipeline.sources.week_spill import WeekSpill

SLACK_API_POOL = "slack_api"


class SlackSourceResource(dg.ConfigurableResource):
    """A source of Slack thread documents for (day, channel) partitions."""

    def read_partitions(
        self, days_by_channel: Mapping[str, Sequence[str]], log: Callable[[str], None] | None = None
    ) -> SourceRead:
        raise NotImplementedError


class SlackResource(LiveApiResource, SlackSourceResource):
    """The Slack Web API through slack-sdk's WebClient (token from ``SLACK_BOT_TOKEN``)."""

    token: str = Field(description="Bot token (xoxb-...); set it with EnvVar('SLACK_BOT_TOKEN')")
    base_url: str | None = Field(
        default=None, description="Web API base URL override (SLACK_API_BASE_URL), for proxies"
    )
    page_size: int = Field(default=200, description="`limit` per page: 200 at Tier 3, 15 for non-Marketplace apps")
    lookback_days: int = Field(default=30, description="Days of roots re-listed to find late replies and edits")
    rescan_thread_replies: bool = Field(default=False, description="Re-read every thread in the lookback (reply edits)")
    include_private: bool = Field(default=True, description="Read private channels the bot was invited to")
    include_archived: bool = Field(default=False, description="Discover archived channels too")
    channel_allow: list[str] = Field(default_factory=list, description="Channel names/regexes to keep (empty: all)")
    channel_deny: list[str] = Field(default_factory=list, description="Channel names/regexes to skip")
    rate_limit_retries: int = Field(default=50, description="Attempts per call while Slack answers 429 (Retry-After)")
    server_error_retries: int = Field(default=5, description="Attempts per call on HTTP 500/503")
    connection_retries: int = Field(default=5, description="Attempts per call on dropped connections")
    timeout_seconds: int = Field(
        default=30, description="Seconds each HTTP request may take to connect and to answer in full"
    )
    page_cap: int = Field(default=DEFAULT_PAGE_CAP, description="Pages per paged call before the read stops")
    requests_per_partition: int | None = Field(
        default=None, description="Requests a channel's read may make per day it covers (None: no budget)"
    )
    seconds_per_partition: int | None = Field(
        default=None, description="Seconds a channel's read may take per day it covers (None: no budget)"
    )

    def sync_settings(self) -> SlackSyncSettings:
        return sync_settings_of(
            self,
            SlackSyncSettings,
            requests_per_day=self.requests_per_partition,
            seconds_per_day=self.seconds_per_partition,
        )

    def read_directory(
        self, log: Callable[[str], None] | None = None, previous: DirectoryStore | None = None
    ) -> DirectorySnapshot:
        """The workspace's users and the members of private and shared channels, from the Web API; a channel whose
        members cannot be read keeps those ``previous`` holds (one failed read never revokes or grants)."""
        return slack_directory.read_api_directory(self.reader(log), previous=previous)

    def reader(self, log: Callable[[str], None] | None = None) -> SlackApiReader:
        """A fresh reader (with its own user/channel caches and call counters) for one run."""
        client = build_web_client(
            self.token,
            self.base_url,
            stats=ApiStats(),
            rate_limit_retries=self.rate_limit_retries,
            server_error_retries=self.server_error_retries,
            connection_retries=self.connection_retries,
            timeout=self.timeout_seconds,
        )
        return SlackApiReader(client, self.sync_settings(), log)

    def live_read(self) -> LiveRead:
        shown = {"lookback_days": self.lookback_days, "page_size": self.page_size, "page_cap": self.page_cap}
        return LiveRead(SlackAccessError, ("threads_fetched",), metadata=shown)


class SlackExportResource(SlackSourceResource):
    """An offline Slack export (folder or zip) read through the same partitioned assets as the API.

    Its workspace comes from the export (team ids on users and messages, hosts in permalinks), else from
    ``team_id``/``workspace_domain`` (SLACK_TEAM_ID, SLACK_WORKSPACE_DOMAIN); a read fails naming the flag when
    neither says."""

    path: str
    team_id: str | None = Field(default=None, description="Workspace team id where the export names none")
    workspace_domain: str | None = Field(default=None, description="Workspace host, e.g. acme.slack.com")

    def input_paths(self) -> list[str]:
        return [self.path]

    def read_directory(
        self, log: Callable[[str], None] | None = None, previous: DirectoryStore | None = None
    ) -> DirectorySnapshot:
        """The export's users and channel members (users.json, channels.json, groups.json, mpims.json)."""
        return slack_directory.read_export_directory(self.path, self.identity().team_id)

    def identity(self) -> SlackIdentity:
        return _slack_identity(self.path, self.team_id, self.workspace_domain, file_version(self.path))

    def read(self) -> SlackRead:
        identity = self.identity()
        return _read_slack(self.path, identity.team_id, identity.domain, file_version(self.path))

    def spill(self) -> WeekSpill:
        """The export's documents spilled to one file per week, read channel by channel (issue 68: neither the
        first index's check nor its batches hold the whole export)."""
        identity = self.identity()
        return _spill_slack(self.path, identity.team_id, identity.domain, file_version(self.path))

    def read_partitions(
        self, days_by_channel: Mapping[str, Sequence[str]], log: Callable[[str], None] | None = None
    ) -> SourceRead:
        days = {day for channel_days in days_by_channel.values() for day in channel_days}
        return self.spill().read(days_by_channel, days)


@lru_cache(maxsize=4)
def _slack_identity(path: str, team_id: str | None, domain: str | None, _mtime: float) -> SlackIdentity:
    return resolve_slack_identity(path, team_id, domain)


# A backfill runs many steps in one process; parse each source file once per version of it.
@lru_cache(maxsize=2)
def _read_slack(path: str, team_id: str, domain: str | None, _mtime: float) -> SlackRead:
    return SlackExportReader(path, team_id, domain).read()


@lru_cache(maxsize=2)
def _spill_slack(path: str, team_id: str, domain: str | None, _mtime: float) -> WeekSpill:
    reader = SlackExportReader(path, team_id, domain)

    def channels() -> Iterator[tuple[list[Document], list[RecordProblem]]]:
        yield [], list(reader.problems)  # the manifests' problems, also where no channel is listed
        for channel_id in list(reader.channels):
            read = reader.read([channel_id])
            yield read.documents, read.problems

    # Documents no partition holds go where every run's checks see (and report) them, as with the whole read.
    return WeekSpill.write(channels(), operator_partition_start())
