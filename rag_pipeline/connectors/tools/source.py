"""Tool definitions as a registered source (``kind="tool_catalog"``): searched by tool search only, never by document
search."""

from __future__ import annotations

from rag_pipeline.connectors.source_facts import built_in_fields
from rag_pipeline.connectors.tools.catalog import tool_payload
from rag_pipeline.connectors.tools.settings import ToolsSettings
from rag_pipeline.sources.registry import IndexOption, Source

TOOLS = Source(
    **built_in_fields("tools", "Tools", "catalogs", ToolsSettings),
    index_options=(
        IndexOption(
            "--tools-catalog",
            "catalog",
            "JSON file of tool definitions (MCP or OpenAI shape) for tool search (RAG_TOOLS_CATALOG)",
            "path",
            True,
        ),
    ),
    index_examples=("rag-pipeline index --tools-catalog tools.json --source tools",),
    payload=tool_payload,
    describe_identity=lambda identity: str(identity.get("described") or "tool catalog"),
    kind="tool_catalog",
)
