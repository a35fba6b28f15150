"""Whose Jira dump or CSV export this is: the host of the issues' ``self`` URLs, else the site given."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.atlassian.identity import resolve_site, url_host
from rag_pipeline.sources.identity import SiteIdentity
from rag_pipeline.sources.json_lines import check_compression

_JIRA_ISSUES_SCANNED = 5_000


@dataclass(frozen=True)
class JiraIdentity(SiteIdentity):
    """A Jira site: its host (ids, ACL groups, issue URLs)."""


def jira_sites(path: str | Path) -> Counter[str]:
    """Hosts of the ``self`` URLs of a JSON-lines dump's issues (gzipped or not)."""
    hosts: Counter[str] = Counter()
    target = Path(path)
    # A .gz that is not gzip would read as a dump naming no site, and the error would ask for --jira-site.
    opener = gzip.open if check_compression(target, "Jira dump") else open
    try:
        with opener(target, "rt", encoding="utf-8-sig", errors="replace") as handle:
            for number, line in enumerate(handle):
                if number >= _JIRA_ISSUES_SCANNED:
                    break
                host = _self_host(line)
                if host:
                    hosts[host] += 1
    except (OSError, EOFError):
        pass  # the reader reports an unreadable dump
    return hosts


def _self_host(line: str) -> str | None:
    try:
        issue: Any = json.loads(line)
    except Exception:  # any line that does not decode (a RecursionError too) is the reader's to report
        return None
    return url_host(issue.get("self")) if isinstance(issue, dict) else None


def resolve_jira_identity(found: Counter[str], site: str | None, where: str) -> JiraIdentity:
    """The site of a dump or CSV export: from the hosts its data names (``found``), else from ``site``."""
    return JiraIdentity(resolve_site(found, site, where, "--jira-site", "JIRA_SITE", "jira.acme.com"))
