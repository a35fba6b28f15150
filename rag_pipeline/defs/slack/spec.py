"""Everything Slack adds to the code location, built from the settings: what differs from any live source
(discovery, reconciliation, the raw asset's words); the shape is :mod:`rag_pipeline.defs.chain.live_spec`'s."""

import logging
from collections.abc import Callable, Mapping, Sequence

import dagster as dg
from pydantic import Field

from rag_pipeline.connectors.slack.api import SlackApiReader
from rag_pipeline.connectors.slack.reconcile import plan_channel
from rag_pipeline.connectors.slack.settings import SlackApiSettings, SlackSettings
from rag_pipeline.defs.chain.live_spec import (
    Discovered,
    LiveSource,
    Reconciliation,
    Skipped,
    api_limits,
    live_source_spec,
    report_listing_problems,
)
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.slack.resources import SLACK_API_POOL, SlackExportResource, SlackResource
from rag_pipeline.defs.source_spec_kit import require_listed
from rag_pipeline.index.store import IndexedDocument
from rag_pipeline.reconciliation.reconcile import ReconcilePlan
from rag_pipeline.settings import ApiLimits, Settings
from rag_pipeline.sources.problems import RecordProblem

_log = logging.getLogger(__name__)
Planner = Callable[[str, Mapping[str, IndexedDocument]], ReconcilePlan]


def slack_api_resource(api: SlackApiSettings, limits: ApiLimits | None = None) -> SlackResource:
    """The live Slack connector; the token stays an EnvVar, resolved only inside a run."""
    return SlackResource(
        token=dg.EnvVar("SLACK_BOT_TOKEN"),
        base_url=api.base_url,
        page_size=api.page_size,
        lookback_days=api.lookback_days,
        **api_limits(limits),
    )


def select_channels(
    slack: SlackResource, names: Sequence[str], problems: list[RecordProblem] | None = None
) -> list[tuple[str, str]]:
    """(id, name) of the named channels (names or ids; default: every channel the bot can read, reporting on
    stderr the public ones it is not in and listings with an invalid id)."""
    # Outside a run the token is still an unresolved EnvVar; initializing resolves it.
    discovery = slack.process_config_and_initialize().reader().discover()
    report_listing_problems("Slack", discovery.problems, problems)
    if not names and discovery.not_member:
        _log.warning(
            "Slack: skipped %d channel(s) the bot is not a member of (invite it to sync them): %s",
            len(discovery.not_member),
            ", ".join(f"#{c.name}" for c in discovery.not_member),
        )
    # A channel named explicitly is synced even when the bot is not in it, so its run fails with not_in_channel
    # and the advice to invite the bot, instead of a vague "not found".
    discovered = [*discovery.channels, *discovery.not_member]
    by_key = {c.name: c for c in discovered} | {c.id: c for c in discovered}
    wanted = [n.lstrip("#") for n in names] or [c.id for c in discovery.channels]
    require_listed(
        wanted,
        by_key,
        (c.name for c in discovered),
        "Slack channel(s) {} not found among the channels the bot can read",
        "invite the bot to a private channel, or check the allow/deny lists",
    )
    return [(by_key[n].id, by_key[n].name) for n in wanted]


class SlackReconciliationConfig(dg.Config):
    """Which channels to reconcile (default: every discovered channel)."""

    channels: list[str] = Field(default_factory=list, description="Channel ids; empty: every discovered channel")
    lookback_days: int | None = Field(
        None, description="Re-read threads whose root is this recent (default: the slack resource's lookback_days)"
    )


def discover_channels(slack: SlackResource, log: Callable[[str], None]) -> Discovered:
    """The channels the bot reads (public ones it is in, private ones it was invited to), and what was skipped."""
    discovery = slack.reader(log).discover()
    return Discovered(
        ids=[c.id for c in discovery.channels],
        skipped=(
            Skipped(
                "channel(s) the bot is not a member of (invite it to sync them)",
                "not_member",
                [f"#{c.name} ({c.id})" for c in discovery.not_member],
            ),
            Skipped("channel listing(s) with an invalid id", "invalid", [str(p) for p in discovery.problems]),
        ),
    )


def plan_reconciliation(slack: SlackResource, reader: SlackApiReader, config: SlackReconciliationConfig) -> Planner:
    lookback = slack.lookback_days if config.lookback_days is None else config.lookback_days

    def plan(channel_id: str, indexed: Mapping[str, IndexedDocument]) -> ReconcilePlan:
        return plan_channel(reader, channel_id, indexed, lookback)

    return plan


def slack_spec(settings: Settings) -> SourceSpec:
    """Slack: weekly partitions, ``slack_threads`` and its chain, export or Web API, discovery, reconciliation."""
    slack = settings.section("slack", SlackSettings)
    return live_source_spec(
        settings,
        LiveSource(
            name="slack",
            containers_label="channels",
            raw_asset="slack_threads",
            raw_description="Slack threads whose latest activity falls in the partition's week (UTC), of every "
            "channel the run covers: root and replies in order, markup cleaned, system and bot messages dropped, with "
            "version and channel ACL. Read from the Slack Web API (late replies through a lookback over roots) or, "
            "offline, from a Slack export.",
            api_pool=SLACK_API_POOL,
            offline_resource_key="slack_export",
            offline_resource=SlackExportResource(
                path=str(slack.export), team_id=slack.offline_team, workspace_domain=slack.offline_domain
            ),
            live_resource=slack_api_resource(slack.api, settings.api_limits) if slack.api else None,
            select_live_containers=select_channels,
            discover=discover_channels,
            discovery_sensor="slack_channel_discovery_sensor",
            discovery_description="Lists the workspace's channels (public ones the bot is in, and private ones it was "
            "invited to; archived skipped by default; allow/deny lists from the slack resource), adds new ones as "
            "`slack_channels` partitions (the sync sensor then requests their initial history). Public channels the "
            "bot is not in and listings with an invalid id are skipped and reported in the tick.",
            cursor_key="channels",
            reconciliation=Reconciliation(
                config=SlackReconciliationConfig,
                containers_field="channels",
                plan=plan_reconciliation,
                cron="0 3 * * *",
                description="Compares every discovered channel's indexed threads with what Slack lists now: removes "
                "threads whose root is gone (a tombstoned root keeps its thread) and rewrites threads in the lookback "
                "whose messages changed without a newer timestamp (deleted replies); gives every indexed thread of a "
                "channel whose members changed (private channels) the channel's ACL now, without re-embedding.",
                job_description="Removes Slack threads deleted at the source, rewrites threads whose replies were "
                "deleted and updates the ACL of threads in channels whose members changed.",
                schedule_description="Daily Slack reconciliation (deletions) at 03:00 UTC.",
            ),
        ),
    )
