"""Slack raw threads (one document per thread, in the partition of its latest activity)."""

import dagster as dg

from rag_pipeline.defs.chain.partitions import SLACK_CHANNELS
from rag_pipeline.defs.chain.raw import build_raw_documents_asset
from rag_pipeline.defs.slack.resources import SLACK_API_POOL
from rag_pipeline.settings import DEFAULT_MAX_DOCUMENT_CHARS


def build_slack_threads(
    partitions_def: dg.PartitionsDefinition,
    first_day: str,
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS,
) -> dg.AssetsDefinition:
    """The ``slack_threads`` asset over weekly partitions."""
    return build_raw_documents_asset(
        name="slack_threads",
        source="slack",
        pool=SLACK_API_POOL,
        partitions_def=partitions_def,
        first_day=first_day,
        containers_name=SLACK_CHANNELS,
        max_document_chars=max_document_chars,
        failed_label="channels_failed",
        description="Slack threads whose latest activity falls in the partition's week (UTC), of every channel the "
        "run covers: root and "
        "replies in order, markup cleaned, system and bot messages dropped, with version and channel ACL. Read from "
        "the Slack Web API (late replies through a lookback over roots) or, offline, from a Slack export.",
    )
