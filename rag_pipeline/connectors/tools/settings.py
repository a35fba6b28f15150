"""The tools source's settings section: where tool definitions come from and how tool search scores them."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from rag_pipeline.env_values import EnvValues, SettingsError
from rag_pipeline.sources.registry import InputCheck, SourceSettings

# The tool-retrieval eval set the Dagster evaluation and bench/tool_search.py score (MetaTool, MIT).
DEFAULT_TOOL_EVAL_DIR = Path(__file__).resolve().parents[3] / "eval_sets" / "tools_metatool"
# The design's multi-signal score: 0.5 × semantic + 0.3 × usage + 0.2 × success.
DEFAULT_WEIGHTS = (0.5, 0.3, 0.2)


class ToolsSettings(SourceSettings):
    """RAG_TOOLS_CATALOG (a JSON file of tool definitions), RAG_TOOLS_MCP_SERVERS (comma-separated Streamable HTTP
    URLs whose ``tools/list`` is read), RAG_TOOLS_CRITICAL (tools every tool search returns), and the score's
    RAG_TOOL_SEARCH_WEIGHTS (semantic,usage,success), RAG_TOOL_SEARCH_TOP_K, RAG_TOOL_SEARCH_CACHE_ENTRIES and
    RAG_TOOL_SEARCH_CACHE_SECONDS; RAG_TOOL_ACTIVE_MAX_TOOLS, RAG_TOOL_ACTIVE_MAX_SETS and
    RAG_TOOL_ACTIVE_TTL_SECONDS, the bounds of each caller's active set; RAG_AGENT_TOOL_SEARCH (the answer agent
    finds its tools by tool search); RAG_TOOL_EVAL_DIR, the tool-retrieval eval set. Neither a catalog nor a server:
    the source holds nothing."""

    catalog: Path | None = None
    mcp_servers: tuple[str, ...] = ()
    critical: tuple[str, ...] = ()
    weights: tuple[float, float, float] = DEFAULT_WEIGHTS
    top_k: int = 5
    cache_entries: int = 512
    cache_seconds: float = 300.0
    # Seconds an MCP server may take to list its tools before it is reported and skipped.
    server_timeout_seconds: float = 20.0
    # RAG_TOOL_EVAL_DIR: the tool-retrieval eval set (test queries, training split, its catalog).
    eval_dir: Path = DEFAULT_TOOL_EVAL_DIR
    # Each caller's active tool set: tools in one set, sets kept, seconds an untouched set lives (issue 67).
    active_max_tools: int = 20
    active_max_sets: int = 1000
    active_ttl_seconds: float = 3600.0
    # RAG_AGENT_TOOL_SEARCH: the answer agent starts from its critical set and finds its other tools by tool search.
    agent_tool_search: bool = False

    @classmethod
    def from_env(cls, env: EnvValues) -> Self:
        return cls(
            catalog=env.optional_path("RAG_TOOLS_CATALOG"),
            mcp_servers=env.names("RAG_TOOLS_MCP_SERVERS"),
            critical=env.names("RAG_TOOLS_CRITICAL"),
            weights=_weights(env.get("RAG_TOOL_SEARCH_WEIGHTS")),
            top_k=env.int("RAG_TOOL_SEARCH_TOP_K", 5, minimum=1) or 5,
            cache_entries=env.int("RAG_TOOL_SEARCH_CACHE_ENTRIES", 512, minimum=0) or 0,
            cache_seconds=env.float("RAG_TOOL_SEARCH_CACHE_SECONDS", 300.0, 0.0, 86_400.0),
            server_timeout_seconds=env.float("RAG_TOOLS_SERVER_TIMEOUT", 20.0, 1.0, 600.0),
            eval_dir=env.path("RAG_TOOL_EVAL_DIR", DEFAULT_TOOL_EVAL_DIR),
            active_max_tools=env.int("RAG_TOOL_ACTIVE_MAX_TOOLS", 20, minimum=1) or 20,
            active_max_sets=env.int("RAG_TOOL_ACTIVE_MAX_SETS", 1000, minimum=1) or 1000,
            active_ttl_seconds=env.float("RAG_TOOL_ACTIVE_TTL_SECONDS", 3600.0, 1.0, 30 * 86_400.0),
            agent_tool_search=env.flag("RAG_AGENT_TOOL_SEARCH", False),
        )

    def inputs(self) -> tuple[InputCheck, ...]:
        return (
            (InputCheck(self.catalog, "tool catalog", "--tools-catalog", "RAG_TOOLS_CATALOG"),) if self.catalog else ()
        )


def _weights(raw: str | None) -> tuple[float, float, float]:
    if raw is None:
        return DEFAULT_WEIGHTS
    parts = [p.strip() for p in raw.split(",")]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or any(v < 0 for v in values) or sum(values) <= 0:
        raise SettingsError(
            f"RAG_TOOL_SEARCH_WEIGHTS must be three non-negative numbers semantic,usage,success (e.g. 0.5,0.3,0.2), "
            f"got {raw!r}"
        )
    return values[0], values[1], values[2]
