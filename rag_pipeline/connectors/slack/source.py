"""Slack as a registered source: its settings section, ``index`` options, ``sync`` API and Dagster spec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_pipeline.connectors.slack import mining
from rag_pipeline.connectors.slack.access import describe_group, guest_note, thread_channel
from rag_pipeline.connectors.slack.settings import SlackSettings
from rag_pipeline.connectors.source_facts import built_in_fields, mining_facts
from rag_pipeline.sources.registry import AccessFacts, IndexOption, LiveApi, PushedChanges, RetrievalFacts, Source


def describe_identity(identity: Mapping[str, Any]) -> str:
    host = identity.get("domain")
    links = f"links on {host}" if host else "no links (no workspace host found; pass --slack-domain)"
    return f"Slack workspace {identity.get('team_id')}, {links}"


SLACK = Source(
    **built_in_fields("slack", "Slack", "channels", SlackSettings),
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
        push=PushedChanges("rag_pipeline.connectors.slack.events:SlackEvents", "slack_signing_secret"),
    ),
    describe_identity=describe_identity,
    retrieval=RetrievalFacts(
        # Chosen by bench/experiments/hybrid_levers.py (docs/notes/hybrid_quality.md), out of fold: k=10 with
        # dense 1.6 / BM25 0.4, chosen in 4 of 5 folds (0.672 vs 0.648 for plain RRF, p = 0.03). Thread roots are
        # not summaries, so no title-line prefetch (0.674 vs 0.676).
        fusion={"k": 10, "dense_weight": 1.6, "sparse_weight": 0.4},
        # In a CJK index (issue 53, bench/cjk_chat.py, docs/notes/korean.md) the weak multilingual dense list must
        # not get 4x BM25's weight, while the threads' title vectors find the thread whose first answer matches
        # the question: hybrid 0.522 -> 0.703 (Korean) and 0.334 -> 0.377 (Chinese) nDCG@10.
        cjk_fusion={"k": 10, "document_title_weight": 1.0},
        rerank_indicator=True,
        thread_level_bm25=True,
        query_words=r"\bslack\b|슬랙|スラック",
    ),
    access=AccessFacts(
        describe_group=describe_group,
        document_container=thread_channel,
        guest_note=guest_note,
        refresh_acls="rag_pipeline.connectors.slack.acl_refresh:refresh_channel_acls",
    ),
    mining=mining_facts(mining, miners=("rag_pipeline.connectors.slack.mining:thread_miner",)),
    sync_metadata_aliases={"threads_updated": "documents_updated"},  # the name the Slack contract started with
)
