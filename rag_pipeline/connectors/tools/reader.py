"""Reading every configured tool definition into documents: the catalog file and each MCP server's listing.

A bad entry or an unreachable server is a problem naming it; the other tools are read (one failed server marks
only its own container failed, so its tools already indexed are kept, not deleted as vanished)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime
from datetime import time as day_start
from functools import lru_cache

from rag_pipeline.connectors.tools.catalog import CATALOG_CONTAINER, read_catalog, server_container, tool_documents
from rag_pipeline.connectors.tools.mcp_listing import ServerListingError, list_server_tools
from rag_pipeline.connectors.tools.settings import ToolsSettings
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import SourceRead


def read_tools(settings: ToolsSettings, first_day: str) -> SourceRead:
    """Every tool of the catalog and the MCP servers, each dated ``first_day`` (the partitions' first): a catalog
    has no history, so all of it lives in one partition whenever it is read, and a later read of a changed tool
    rewrites it in place (same version, new content)."""
    read_at = datetime.combine(date.fromisoformat(first_day), day_start(0), tzinfo=UTC)
    out = SourceRead()
    sections = []
    if settings.catalog is not None:
        tools, problems = read_catalog(settings.catalog)
        out.problems.extend(problems)
        if not tools and problems:
            out.failed[CATALOG_CONTAINER] = problems[0].reason
        sections.append((CATALOG_CONTAINER, tools))
    for url in settings.mcp_servers:
        container = server_container(url)
        try:
            tools, bad = list_server_tools(url, settings.server_timeout_seconds)
        except ServerListingError as exc:
            out.problems.append(RecordProblem(url, str(exc)))
            out.failed[container] = str(exc)
            continue
        out.problems.extend(RecordProblem(f"{url} tool {name}", reason) for name, reason in bad)
        sections.append((container, tools))
    for container, tools in sections:
        documents, problems = tool_documents(tools, container, read_at, settings.critical)
        out.documents.extend(documents)
        out.problems.extend(problems)
    out.metadata["tool_servers"] = len(settings.mcp_servers)
    return out


@dataclass(frozen=True)
class ToolsIdentity:
    """Whose tools these are: one tool index per data folder (``key``); ``listing`` is a digest of what was read,
    so an ``index`` run re-reads when a server's tools changed (it is part of the run's fingerprint, not the key)."""

    described: str
    listing: str

    @property
    def key(self) -> str:
        return "tools"

    def describe(self) -> str:
        return self.described


def tools_identity(settings: ToolsSettings, first_day: str) -> ToolsIdentity:
    """The identity of the configured tools, from one read (cached for a minute: a run asks for the identity
    and then reads)."""
    read = read_tools_cached(settings, first_day)
    digest = hashlib.sha256("\n".join(sorted(d.content_hash for d in read.documents)).encode()).hexdigest()[:16]
    parts = [f"catalog {settings.catalog.name}"] if settings.catalog else []
    parts += [f"MCP server {url}" for url in settings.mcp_servers]
    return ToolsIdentity(", ".join(parts) or "no tools configured", digest)


def read_tools_cached(settings: ToolsSettings, first_day: str) -> SourceRead:
    """:func:`read_tools`, shared with an identity asked for in the same minute (of an unchanged catalog file)."""
    catalog = settings.catalog
    stamp = catalog.stat().st_mtime_ns if catalog is not None and catalog.exists() else 0
    read = _read_for_a_minute(settings, first_day, int(time.time() // 60), stamp)
    return SourceRead(list(read.documents), list(read.problems), dict(read.partition_day), dict(read.failed),
                      dict(read.metadata))  # fmt: skip


@lru_cache(maxsize=4)
def _read_for_a_minute(settings: ToolsSettings, first_day: str, minute: int, catalog_stamp: int) -> SourceRead:
    return read_tools(settings, first_day)
