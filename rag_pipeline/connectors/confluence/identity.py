"""Whose Confluence dump this is: the host of the content objects' ``_links.base``, else the site given."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.connectors.atlassian.identity import resolve_site, url_host
from rag_pipeline.connectors.confluence.dump import ConfluenceDumpReader
from rag_pipeline.sources.identity import SiteIdentity
from rag_pipeline.sources.problems import RecordProblem

_RECORDS_SCANNED = 5_000


@dataclass(frozen=True)
class ConfluenceIdentity(SiteIdentity):
    """A Confluence site: its host (ids, ACL groups, page URLs)."""


def confluence_sites(path: str | Path) -> Counter[str]:
    """Hosts of the ``_links.base`` URLs of a dump's first records (gzipped or not)."""
    hosts: Counter[str] = Counter()
    ignored: list[RecordProblem] = []  # the reader reports bad lines
    try:
        for number, (_, record) in enumerate(ConfluenceDumpReader(path, "?").records(ignored)):
            if number >= _RECORDS_SCANNED:
                break
            links = record.get("_links")
            base = links.get("base") if isinstance(links, dict) else None
            host = url_host(base)
            if host:
                hosts[host] += 1
    except (OSError, EOFError, ValueError):
        pass  # the reader reports an unreadable dump
    return hosts


def resolve_confluence_identity(found: Counter[str], site: str | None, where: str) -> ConfluenceIdentity:
    """The site of a dump: from the hosts its data names (``found``), else from ``site``."""
    return ConfluenceIdentity(
        resolve_site(found, site, where, "--confluence-site", "CONFLUENCE_SITE", "acme.atlassian.net")
    )
