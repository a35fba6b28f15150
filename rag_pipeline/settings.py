"""Environment-driven defaults shared by the Dagster layer and the CLI."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_DATA_DIR = PACKAGE_DIR / "data"
BUNDLED_SLACK_EXPORT = BUNDLED_DATA_DIR / "slack_ubuntu" / "export"
BUNDLED_JIRA_DUMP = BUNDLED_DATA_DIR / "jira_appcelerator" / "issues.jsonl.gz"
BUNDLED_SLACK_TEAM = "T0UBUNTU"
BUNDLED_SLACK_DOMAIN = "ubuntu.slack.com"
BUNDLED_JIRA_SITE = "jira.appcelerator.org"
# Earliest partition day: the bundled Slack export starts in November 2004.
DEFAULT_PARTITION_START = "2004-01-01"


def eval_dir() -> Path:
    """Eval sets: ``RAG_EVAL_DIR``, else the project's ``eval_sets/`` (next to the package in a checkout)."""
    configured = os.environ.get("RAG_EVAL_DIR")
    if configured:
        return Path(configured).resolve()
    return PACKAGE_DIR.parent / "eval_sets"


def data_dir() -> Path:
    """Where parquet files, the embedded Qdrant engine and the embedding cache live."""
    return Path(os.environ.get("RAG_DATA_DIR", ".rag_data")).resolve()


def partition_start() -> str:
    return os.environ.get("RAG_PARTITION_START", DEFAULT_PARTITION_START)
