"""Slack as a registered source: its settings section, ``index`` options, ``sync`` API and Dagster spec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_pipeline.connectors.slack.settings import SlackSettings
from rag_pipeline.sources.registry import IndexOption, LiveApi, Source


def describe_identity(identity: Mapping[str, Any]) -> str:
    host = identity.get("domain")
    links = f"links on {host}" if host else "no links (no workspace host found; pass --slack-domain)"
    return f"Slack workspace {identity.get('team_id')}, {links}"


SLACK = Source(
    name="slack",
    title="Slack",
    containers_label="channels",
    settings=SlackSettings,
    dagster_spec="rag_pipeline.defs.slack.spec:slack_spec",
    index_options=(
        IndexOption("--slack-export", "export", "Slack export folder or zip (RAG_SLACK_EXPORT)", "path", True),
        IndexOption("--slack-team", "team", "workspace team id where the export names none (SLACK_TEAM_ID)"),
        IndexOption(
            "--slack-domain", "domain", "workspace host for links, e.g. acme.slack.com (SLACK_WORKSPACE_DOMAIN)"
        ),
    ),
    index_examples=("rag-pipeline index --slack-export acme-export.zip --data-dir acme",),
    live_api=LiveApi(
        required=("SLACK_BOT_TOKEN", "a Slack bot token, xoxb-..."),
        label="Slack Web API",
        containers_flag="--channel",
        containers_help="Slack channel name or id (repeatable; default: all discovered)",
        container_prefix="#",
    ),
    describe_identity=describe_identity,
)
