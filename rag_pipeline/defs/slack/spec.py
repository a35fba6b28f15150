"""Everything Slack adds to the code location, built from the settings."""

import logging
from collections.abc import Sequence

import dagster as dg

from rag_pipeline.connectors.slack.settings import SlackApiSettings, SlackSettings
from rag_pipeline.defs.chain.assets import ChainKeys, build_source_chain
from rag_pipeline.defs.chain.partitions import slack_channels, weekly_partitions
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.slack.assets import build_slack_threads
from rag_pipeline.defs.slack.reconciliation import build_slack_reconciliation
from rag_pipeline.defs.slack.resources import SlackExportResource, SlackResource
from rag_pipeline.defs.slack.sensors import build_slack_channel_discovery_sensor
from rag_pipeline.settings import ApiLimits, Settings
from rag_pipeline.sources.problems import RecordProblem, SourceError

_log = logging.getLogger(__name__)


def slack_api_resource(api: SlackApiSettings, limits: ApiLimits | None = None) -> SlackResource:
    """The live Slack connector; the token stays an EnvVar, resolved only inside a run."""
    limits = limits or ApiLimits()
    return SlackResource(
        token=dg.EnvVar("SLACK_BOT_TOKEN"),
        base_url=api.base_url,
        page_size=api.page_size,
        lookback_days=api.lookback_days,
        timeout_seconds=limits.timeout_seconds,
        page_cap=limits.page_cap,
        requests_per_partition=limits.requests_per_partition,
        seconds_per_partition=limits.seconds_per_partition,
    )


def select_channels(
    slack: SlackResource, names: Sequence[str], problems: list[RecordProblem] | None = None
) -> list[tuple[str, str]]:
    """(id, name) of the named channels (names or ids; default: every channel the bot can read, reporting on
    stderr the public ones it is not in and listings with an invalid id)."""
    # Outside a run the token is still an unresolved EnvVar; initializing resolves it.
    discovery = slack.process_config_and_initialize().reader().discover()
    if problems is not None:
        problems.extend(discovery.problems)
    else:
        for problem in discovery.problems:
            _log.warning("Slack: skipped %s", problem)
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
    missing = [n for n in wanted if n not in by_key]
    if missing:
        known = ", ".join(sorted(c.name for c in discovered)) or "none"
        raise SourceError(
            f"Slack channel(s) {', '.join(missing)} not found among the channels the bot can read ({known}); "
            "invite the bot to a private channel, or check the allow/deny lists"
        )
    return [(by_key[n].id, by_key[n].name) for n in wanted]


def slack_spec(settings: Settings) -> SourceSpec:
    """Slack: weekly partitions, ``slack_threads`` and its chain, export or Web API, reconciliation."""
    partitions = weekly_partitions(settings.partition_start)
    slack = settings.section("slack", SlackSettings)
    keys = ChainKeys("slack", "slack_threads")
    raw = build_slack_threads(partitions, settings.partition_start, settings.max_document_chars)
    discovery = build_slack_channel_discovery_sensor(keys)
    return SourceSpec(
        name="slack",
        containers_label="channels",
        partitions=partitions,
        containers=slack_channels,
        keys=keys,
        assets=(raw, *build_source_chain(keys, partitions)),
        offline_resource_key="slack_export",
        offline_resource=SlackExportResource(
            path=str(slack.export),
            team_id=slack.offline_team,
            workspace_domain=slack.offline_domain,
        ),
        live_resource=slack_api_resource(slack.api, settings.api_limits) if slack.api else None,
        live=build_slack_reconciliation(keys, discovery),
        api_tag="slack-api",
        select_live_containers=select_channels,
        directory=True,
    )
