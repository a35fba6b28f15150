"""Jira as a registered source: its settings section, ``index`` options, ``sync`` API, issue payload and
Dagster spec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_pipeline.connectors.jira import mining
from rag_pipeline.connectors.jira.access import describe_group
from rag_pipeline.connectors.jira.resolution import RESOLUTION_FEATURES, UNRESOLVED
from rag_pipeline.connectors.jira.settings import JiraSettings
from rag_pipeline.connectors.source_facts import built_in_fields, mining_facts
from rag_pipeline.sources.registry import AccessFacts, IndexOption, LiveApi, PushedChanges, RetrievalFacts, Source


def issue_payload(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """An issue's typed links and resolution as payload.

    ``links`` holds ``"<relation>:<key>"`` (e.g. ``"duplicates:AC-30"``, ``"is duplicated by:AC-23"``),
    ``link_types`` the link type names (both filterable). ``resolution`` is the issue's resolution name, or
    ``"Unresolved"`` as Jira shows an open issue; the reranker reads it (an issue closed as a duplicate is
    rarely the one a searcher wants).
    """
    payload: dict[str, Any] = {}
    if "resolution" in metadata:
        payload["resolution"] = metadata["resolution"] or UNRESOLVED
    links = metadata.get("links") or []
    if links:
        payload["links"] = sorted({f"{link.get('relation')}:{link.get('key')}" for link in links})
        payload["link_types"] = sorted({str(link.get("type")) for link in links})
    return payload


def describe_identity(identity: Mapping[str, Any]) -> str:
    return f"Jira site {identity.get('site')}"


JIRA = Source(
    **built_in_fields("jira", "Jira", "projects", JiraSettings),
    index_options=(
        IndexOption("--jira-dump", "dump", "Jira REST issues as JSON lines, .gz or not (RAG_JIRA_DUMP)", "path", True),
        IndexOption(
            "--jira-csv",
            "csv",
            "Jira's CSV export (Export > CSV, all fields); repeatable (RAG_JIRA_CSV, paths joined by ':')",
            "paths",
            True,
        ),
        IndexOption("--jira-site", "site", "Jira site host where the data names none, e.g. jira.acme.com (JIRA_SITE)"),
        IndexOption(
            "--jira-date-format",
            "csv_date_format",
            "strptime formats of the CSV's dates, '|'-separated, tried in turn (RAG_JIRA_CSV_DATE_FORMAT; "
            "default: Jira's '30/Sep/21 5:20 PM' and '30/Sep/21 17:20')",
        ),
        IndexOption(
            "--jira-csv-delimiter", "csv_delimiter", "the CSV's field separator (RAG_JIRA_CSV_DELIMITER; default ',')"
        ),
        IndexOption(
            "--jira-directory",
            "directory",
            "CSV of Jira accounts for the principal directory, columns account_id,email,groups (groups ';'-separated: "
            "a Jira group, project:KEY, security:LEVEL_ID or role:KEY:NAME), for dumps that hold no membership "
            "(RAG_JIRA_DIRECTORY)",
            "path",
            directory=True,
        ),
    ),
    index_examples=(
        "rag-pipeline index --jira-csv jira1.csv --jira-csv jira2.csv --jira-site jira.acme.com",
        "rag-pipeline index --jira-dump issues.jsonl.gz --source jira --json",
    ),
    live_api=LiveApi(
        required=(
            "JIRA_URL",
            "the Jira site URL, plus JIRA_USERNAME + JIRA_API_TOKEN (Cloud) or JIRA_PAT (Server/DC)",
        ),
        label="Jira site",
        containers_flag="--project",
        containers_help="Jira project key (repeatable; default: all discovered)",
        push=PushedChanges("rag_pipeline.connectors.jira.webhooks:JiraWebhooks", "jira_webhook_secret"),
    ),
    payload=issue_payload,
    describe_identity=describe_identity,
    retrieval=RetrievalFacts(
        # Chosen by bench/experiments/hybrid_levers.py (docs/notes/hybrid_quality.md), out of fold: k=10 plus the
        # title-line dense prefetch at 0.5 (5 of 5 folds, 0.629 vs 0.610 without it), plus the document title
        # vectors at 0.5 (bench/experiments/title_vector_lever.py: 5 of 5 folds, 0.638 vs 0.629).
        fusion={"k": 10, "title_dense_weight": 0.5, "document_title_weight": 0.5},
        rerank_features=RESOLUTION_FEATURES,
        rerank_indicator=True,
        query_words=r"\bjira\b|지라|ジラ",
    ),
    access=AccessFacts(describe_group=describe_group, restricted_part="a restricted Jira comment"),
    mining=mining_facts(
        mining, query_text=mining.query_text, miners=("rag_pipeline.connectors.jira.mining:issue_links_miner",)
    ),
)
