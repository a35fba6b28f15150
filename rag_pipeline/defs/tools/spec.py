"""The tools source's Dagster side: a resource reading the catalog and MCP servers, and the shared offline chain."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import dagster as dg
from pydantic import Field

from rag_pipeline.connectors.tools.reader import ToolsIdentity, read_tools_cached, tools_identity
from rag_pipeline.connectors.tools.settings import ToolsSettings
from rag_pipeline.defs.chain.offline_spec import offline_source_spec
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.settings import Settings
from rag_pipeline.sources.source_read import SourceRead


class ToolDefinitionsResource(dg.ConfigurableResource):
    """Tool definitions from a catalog file and the ``tools/list`` of MCP servers (neither: no tools)."""

    catalog: str | None = Field(default=None, description="JSON file of tool definitions (RAG_TOOLS_CATALOG)")
    mcp_servers: list[str] = Field(default_factory=list, description="MCP server URLs (RAG_TOOLS_MCP_SERVERS)")
    critical: list[str] = Field(default_factory=list, description="Tools always offered (RAG_TOOLS_CRITICAL)")
    first_day: str = Field(description="The partitions' first day: every tool is dated there")
    server_timeout_seconds: float = Field(default=20.0, description="Seconds one server may take to list its tools")

    @property
    def path(self) -> str:
        return self.catalog or ", ".join(self.mcp_servers)

    def _settings(self) -> ToolsSettings:
        return ToolsSettings(
            catalog=Path(self.catalog) if self.catalog else None,
            mcp_servers=tuple(self.mcp_servers),
            critical=tuple(self.critical),
            server_timeout_seconds=self.server_timeout_seconds,
        )

    def input_paths(self) -> list[str]:
        return [self.catalog] if self.catalog else []

    def identity(self) -> ToolsIdentity:
        return tools_identity(self._settings(), self.first_day)

    def read(self) -> SourceRead:
        return read_tools_cached(self._settings(), self.first_day)

    def read_partitions(
        self, days_by_container: Mapping[str, Sequence[str]], log: Callable[[str], None] | None = None
    ) -> SourceRead:
        read = self.read()
        read.documents = [d for d in read.documents if d.container in days_by_container]
        return read


def tools_spec(settings: Settings) -> SourceSpec:
    tools = settings.section("tools", ToolsSettings)
    return offline_source_spec(
        name="tools",
        raw_asset="tool_definitions",
        containers_label="catalogs",
        offline_resource=ToolDefinitionsResource(
            catalog=str(tools.catalog) if tools.catalog else None,
            mcp_servers=list(tools.mcp_servers),
            critical=list(tools.critical),
            first_day=settings.partition_start,
            server_timeout_seconds=tools.server_timeout_seconds,
        ),
        settings_partition_start=settings.partition_start,
        max_document_chars=settings.max_document_chars,
        description="Tool definitions (a catalog file and MCP servers' tools/list), one document per tool, for "
        "tool search.",
    )
