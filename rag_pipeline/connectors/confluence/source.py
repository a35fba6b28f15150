"""Confluence as a registered source: its settings section, ``index`` options, ``sync`` API, page payload and
Dagster spec (registered by the Dagster layer's ``defs/confluence``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_pipeline.connectors.confluence import mining
from rag_pipeline.connectors.confluence.acl import describe_group
from rag_pipeline.connectors.confluence.settings import ConfluenceSettings
from rag_pipeline.connectors.source_facts import built_in_fields, mining_facts
from rag_pipeline.sources.registry import AccessFacts, IndexOption, LiveApi, PushedChanges, RetrievalFacts, Source


def page_payload(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A page's space, labels, type and ancestors as payload (filterable): ``space`` (key), ``labels``,
    ``content_type`` ("page" or "blogpost") and ``ancestors`` (page ids, root first: a search within a page tree,
    and what reconciliation compares to see a page moved under another parent)."""
    payload: dict[str, Any] = {}
    if metadata.get("space"):
        payload["space"] = metadata["space"]
    labels = metadata.get("labels") or []
    if labels:
        payload["labels"] = sorted({str(label) for label in labels})
    if metadata.get("content_type"):
        payload["content_type"] = metadata["content_type"]
    if "ancestors" in metadata:
        payload["ancestors"] = [str(a) for a in metadata.get("ancestors") or []]
    return payload


def describe_identity(identity: Mapping[str, Any]) -> str:
    site = identity.get("site")
    return f"Confluence site {site}" if site else "no Confluence dump configured (--confluence-dump)"


CONFLUENCE = Source(
    **built_in_fields("confluence", "Confluence", "spaces", ConfluenceSettings),
    index_options=(
        IndexOption(
            "--confluence-dump",
            "dump",
            "Confluence REST content objects (pages, blog posts, comments, space permissions) as JSON lines, .gz or "
            "not (RAG_CONFLUENCE_DUMP)",
            "path",
            True,
        ),
        IndexOption(
            "--confluence-site",
            "site",
            "Confluence site host where the data names none, e.g. acme.atlassian.net (CONFLUENCE_SITE)",
        ),
        IndexOption(
            "--confluence-directory",
            "directory",
            "CSV of Confluence accounts for the principal directory, columns account_id,email,groups (groups "
            "';'-separated: a Confluence group, space:KEY or restricted:PAGEID), for dumps that hold no membership "
            "(RAG_CONFLUENCE_DIRECTORY)",
            "path",
            directory=True,
        ),
    ),
    index_examples=(
        "rag-pipeline index --confluence-dump pages.jsonl.gz --confluence-site acme.atlassian.net",
        "rag-pipeline index --confluence-dump pages.jsonl --source confluence --json",
    ),
    live_api=LiveApi(
        required=(
            "CONFLUENCE_URL",
            "the Confluence site URL (Cloud: https://acme.atlassian.net/wiki), plus CONFLUENCE_USERNAME + "
            "CONFLUENCE_API_TOKEN (Cloud) or CONFLUENCE_PAT (Data Center)",
        ),
        label="Confluence site",
        containers_flag="--space",
        containers_help="Confluence space key (repeatable; default: all discovered)",
        push=PushedChanges(
            "rag_pipeline.connectors.confluence.webhooks:ConfluenceWebhooks", "confluence_webhook_secret"
        ),
    ),
    payload=page_payload,
    describe_identity=describe_identity,
    # No fusion of its own (none was learned: the shared default) and no reranker indicator column: one would
    # change the feature list every shipped reranker was trained on (docs/notes/confluence.md).
    retrieval=RetrievalFacts(query_words=r"\bconfluence\b|컨플루언스|위키|コンフルエンス"),
    access=AccessFacts(
        describe_group=describe_group,
        restricted_part="a restricted page of a Confluence space",
    ),
    mining=mining_facts(mining),
)
