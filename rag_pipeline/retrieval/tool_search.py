"""Tool search: the few tool definitions a task needs, out of a catalog too large to load whole (the design's
RAG tool search: 74 tools cost 14,800 prompt tokens; a search loads ~1,000).

Candidates come from the same index and retriever as documents, restricted to the tool sources
(``kind="tool_catalog"``): by the dense model, or by BM25 when it is unavailable (the keyword fallback). Each candidate
gets the design's multi-signal score::

    score = w_semantic × semantic + w_usage × usage + w_success × success      (weights 0.5 / 0.3 / 0.2)

- semantic: the query's cosine similarity to the tool over the best candidate's (clipped at 0); in the keyword
  fallback its BM25 score over the best candidate's;
- usage: log(1 + calls) / log(1 + the most calls of any tool, at least 10) — popular tools first among close
  matches, and not one tool made "the most used" by its first call;
- success: (successes + 1) / (calls + 2) — a tool that keeps failing drops; an unused one counts as 0.5.

The critical set (``critical`` in the catalog or RAG_TOOLS_CRITICAL) is always returned. Candidates are cached
per query (a TTL cache); usage and success are applied to them on every call, so an outcome recorded a moment
ago already counts. Every response says how many prompt tokens loading its tools costs against loading all.

A search may also be narrowed (issue 67): ``categories`` keeps the tools tagged with any of them (a filter over
the catalog's tags, not words in the query), ``min_similarity`` drops candidates whose cosine similarity to the
query is below it (the dense arms only: a BM25 or fused score is no similarity), and ``exclude`` leaves out tools
by name (a caller's active set: tools it has loaded already). :class:`ToolView` is how much of each definition a
response carries (``include_full_params=false`` drops the parameter schema, ``max_description_length`` cuts the
description), and the response's prompt tokens count what it carries.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from rag_pipeline.index.store import SearchFilter, VectorStore
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.retrieval.tool_outcomes import ToolStats
from rag_pipeline.sources.registry import tool_sources
from rag_pipeline.text.tokens import cl100k

ToolMode = Literal["multi-signal", "vector", "bm25", "hybrid"]
TOOL_MODES: tuple[str, ...] = ("multi-signal", "vector", "bm25", "hybrid")
# How many candidates the semantic side offers the multi-signal score (usage can only reorder plausible tools).
CANDIDATES = 30
# A category filter ranks every tool of the catalog (up to this many) and keeps the tagged ones, so a category's
# tools are found however far down the unfiltered ranking they sit.
FILTERED_DEPTH = 2000
# What a cut description ends with.
ELLIPSIS = "…"


@dataclass(frozen=True)
class ToolView:
    """How much of each tool definition a response carries: the full parameter schema or none, and the
    description whole or cut to ``max_description_length`` characters (the design's context optimization)."""

    include_full_params: bool = True
    max_description_length: int | None = None

    @property
    def full(self) -> bool:
        return self.include_full_params and self.max_description_length is None

    def description(self, text: str) -> str:
        limit = self.max_description_length
        if limit is None or len(text) <= limit:
            return text
        return text[: max(0, limit - len(ELLIPSIS))].rstrip() + ELLIPSIS

    def tokens(self, entry: CatalogEntry) -> int:
        """cl100k tokens of the tool as this view hands it to a model (its chat-completions entry)."""
        if self.full:
            return entry.tokens
        definition = entry.definition
        function: dict[str, Any] = {
            "name": entry.name,
            "description": self.description(definition.get("description", "")),
        }
        if self.include_full_params:
            function["parameters"] = definition.get("input_schema", {})
        shown = {"type": "function", "function": function}
        return len(cl100k().encode(json.dumps(shown, ensure_ascii=False, separators=(",", ":"))))


FULL_VIEW = ToolView()


@dataclass(frozen=True)
class ToolSearchConfig:
    """The score's weights (semantic, usage, success), how many tools a search returns, the critical set."""

    weights: tuple[float, float, float] = (0.5, 0.3, 0.2)
    top_k: int = 5
    critical: tuple[str, ...] = ()
    candidates: int = CANDIDATES
    # RAG_AGENT_TOOL_SEARCH: the answer agent finds its tools by tool search (answers/agent.py).
    agent_tool_search: bool = False


@runtime_checkable
class ToolSearchSettings(Protocol):
    """The settings section of the tool-catalog source, as tool search reads it (RAG_TOOL_SEARCH_*)."""

    weights: tuple[float, float, float]
    top_k: int
    critical: tuple[str, ...]
    cache_entries: int
    cache_seconds: float
    active_max_tools: int
    active_max_sets: int
    active_ttl_seconds: float
    agent_tool_search: bool


def tool_search_settings(section: object) -> ToolSearchSettings:
    """The tool-catalog source's section (``Settings.source(tool_catalog_source())``) as tool search reads it."""
    if not isinstance(section, ToolSearchSettings):
        raise TypeError(f"the tool catalog's settings ({type(section).__name__}) lack the tool search settings")
    return section


def tool_search_config(section: ToolSearchSettings) -> ToolSearchConfig:
    return ToolSearchConfig(
        weights=section.weights,
        top_k=section.top_k,
        critical=section.critical,
        agent_tool_search=section.agent_tool_search,
    )


@dataclass(frozen=True)
class CatalogEntry:
    """One indexed tool: its document, definition and prompt cost."""

    document_id: str
    name: str
    container: str
    definition: dict[str, Any]
    tokens: int
    critical: bool


@dataclass
class ToolHit:
    """A tool returned by a search, with each signal of its score."""

    entry: CatalogEntry
    score: float
    semantic: float
    usage: float
    success: float
    critical: bool = False
    # The candidate's own score from its arm: the cosine similarity in the dense arms (what min_similarity bounds).
    similarity: float | None = None

    def to_dict(self, view: ToolView = FULL_VIEW) -> dict[str, Any]:
        definition = self.entry.definition
        shown: dict[str, Any] = {
            "name": self.entry.name,
            "document_id": self.entry.document_id,
            "server": definition.get("server"),
            "description": view.description(definition.get("description", "")),
        }
        if view.include_full_params:
            shown["input_schema"] = definition.get("input_schema", {})
        return {
            **shown,
            "tags": definition.get("tags", []),
            "score": round(self.score, 4),
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "signals": {
                "semantic": round(self.semantic, 4),
                "usage": round(self.usage, 4),
                "success": round(self.success, 4),
            },
            "critical": self.critical,
            "tokens": view.tokens(self.entry),
        }


@dataclass
class ToolSearchResponse:
    """The tools found, how they were found, and the prompt tokens they cost against loading every tool."""

    tools: list[ToolHit]
    mode: str  # the mode asked for
    semantic: Literal["dense", "keyword"]  # keyword: the dense model was unavailable (BM25 fallback)
    cached: bool
    tokens_loaded: int
    tokens_all: int
    catalog_tools: int
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def tokens_saved(self) -> int:
        return max(0, self.tokens_all - self.tokens_loaded)

    def to_dict(self, view: ToolView = FULL_VIEW) -> dict[str, Any]:
        """The response as the faces return it; ``prompt_tokens.loaded`` counts the tools as ``view`` shows them
        (``loaded_full``: the same tools whole)."""
        tools = [t.to_dict(view) for t in self.tools]
        loaded = sum(t["tokens"] for t in tools)
        return {
            "tools": tools,
            "mode": self.mode,
            "semantic": self.semantic,
            "cached": self.cached,
            "catalog_tools": self.catalog_tools,
            "prompt_tokens": {
                "loaded": loaded,
                "loaded_full": self.tokens_loaded,
                "all_tools": self.tokens_all,
                "saved": max(0, self.tokens_all - loaded),
            },
            "warnings": self.warnings,
        }


def read_catalog(store: VectorStore) -> dict[str, CatalogEntry]:
    """Every indexed tool by document id (tools are public: no reader narrows the catalog)."""
    sources = tool_sources()
    if not sources:
        return {}
    entries: dict[str, CatalogEntry] = {}
    fields = ["document_id", "title", "container", "tool", "tool_tokens"]
    for payload in store.parent_payloads(SearchFilter(sources=sources), fields):
        definition = payload.get("tool") or {}
        document_id = str(payload.get("document_id"))
        entries[document_id] = CatalogEntry(
            document_id=document_id,
            name=str(definition.get("name") or payload.get("title") or document_id),
            container=str(payload.get("container") or ""),
            definition=dict(definition),
            tokens=int(payload.get("tool_tokens") or 0),
            critical=bool(definition.get("critical")),
        )
    return entries


# Calls before usage can reach 1: without it, the first call of a new catalog's first tool would give that tool
# the whole usage weight (1 call of 1 is "the most used").
USAGE_SATURATION_CALLS = 10


def usage_signal(stats: Mapping[str, ToolStats]) -> dict[str, float]:
    """usage per tool name: log(1 + calls) over log(1 + the most-called tool's calls, at least 10)."""
    most = max([USAGE_SATURATION_CALLS, *(s.calls for s in stats.values())])
    return {name: math.log1p(s.calls) / math.log1p(most) for name, s in stats.items() if s.calls > 0}


def success_signal(stats: ToolStats | None) -> float:
    """(successes + 1) / (calls + 2): Laplace's estimate, 0.5 for a tool never called."""
    if stats is None:
        return 0.5
    return (stats.successes + 1) / (stats.calls + 2)


def outcome_record(name: str, stats: ToolStats) -> dict[str, Any]:
    """A tool's record after an outcome was counted, as the HTTP route, the MCP tool and the CLI return it."""
    return {"name": name, "calls": stats.calls, "successes": stats.successes,
            "success_rate": round(success_signal(stats), 4)}  # fmt: skip


@dataclass(frozen=True)
class Candidates:
    """A query's candidates (document id, semantic score) best first, how they were found, and the warnings of
    the search that found them: what the query cache keeps."""

    ranked: list[tuple[str, float]]
    semantic: Literal["dense", "keyword"]
    warnings: tuple[str, ...] = ()


class CandidateCache(Protocol):
    """Where a long-lived reader keeps recent queries' candidates (the service's ``ResultCache``)."""

    enabled: bool

    def get(self, key: Hashable) -> Candidates | None: ...

    def put(self, key: Hashable, value: Candidates) -> None: ...


@dataclass(frozen=True)
class ToolRoster:
    """The indexed tools' names and the critical set among them (an active set starts from, and resets to, it)."""

    names: frozenset[str]
    critical: tuple[str, ...]


class ToolSearch:
    """Searches the tool catalog of an index; one per process, shared by its requests (thread-safe). ``cache``
    keeps each query's candidates per index generation (None: every search asks the index)."""

    def __init__(self, config: ToolSearchConfig, cache: CandidateCache | None = None) -> None:
        self.config = config
        self._cache = cache
        self._catalogs: dict[Hashable, dict[str, CatalogEntry]] = {}
        self._lock = threading.Lock()

    def catalog(self, store: VectorStore, generation: Hashable = None) -> dict[str, CatalogEntry]:
        """The index's tools, read once per ``generation`` (the caller's index version; None: read every time)."""
        if generation is None:
            return read_catalog(store)
        with self._lock:
            found = self._catalogs.get(generation)
        if found is None:
            found = read_catalog(store)
            with self._lock:
                self._catalogs = {generation: found}  # an older generation's catalog is never asked for again
        return found

    def roster(self, catalog: Mapping[str, CatalogEntry]) -> ToolRoster:
        """The catalog's tool names and its critical tools (RAG_TOOLS_CRITICAL and those marked so) that are
        indexed, in name order."""
        names = frozenset(entry.name for entry in catalog.values())
        critical = set(self.config.critical) | {e.name for e in catalog.values() if e.critical}
        return ToolRoster(names, tuple(sorted(critical & names)))

    def search(
        self,
        retriever: Retriever,
        principal: Principal,
        query: str,
        stats: Mapping[str, ToolStats],
        *,
        mode: ToolMode = "multi-signal",
        top_k: int | None = None,
        generation: Hashable = None,
        categories: Collection[str] = (),
        min_similarity: float | None = None,
        exclude: Collection[str] = (),
    ) -> ToolSearchResponse:
        """The ``top_k`` best tools for ``query`` (plus the critical set), searched as ``principal``; only tools
        tagged with one of ``categories`` (when given), at least ``min_similarity`` similar to the query (dense
        arms), and none named in ``exclude`` (the critical ones included)."""
        started = time.perf_counter()
        if mode not in TOOL_MODES:
            raise ValueError(f"unknown tool search mode {mode!r}; expected one of {', '.join(TOOL_MODES)}")
        top_k = top_k or self.config.top_k
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        if min_similarity is not None and not -1.0 <= min_similarity <= 1.0:
            raise ValueError(f"min_similarity must be from -1 to 1, got {min_similarity}")
        catalog = self.catalog(retriever.store, generation)
        by_name: dict[str, CatalogEntry] = {}
        for entry in catalog.values():
            by_name.setdefault(entry.name, entry)
        warnings: list[str] = []
        if not catalog:
            warnings.append("no tools are indexed: set RAG_TOOLS_CATALOG or RAG_TOOLS_MCP_SERVERS and index them")
        allowed = in_categories(catalog, categories) if categories else None
        if allowed is not None and not allowed:
            warnings.append(f"no indexed tool is tagged {', '.join(sorted(categories))}")
        depth = max(self.config.candidates, top_k) if mode == "multi-signal" else top_k
        if allowed is not None or exclude:
            # Filtered after the ranking: rank deep enough that the filter leaves top_k where there are as many.
            depth = max(depth, min(len(catalog), FILTERED_DEPTH)) if allowed is not None else depth + len(exclude)
        cache = self._cache if self._cache is not None and self._cache.enabled and generation is not None else None
        key = (generation, mode, depth, query.strip())
        found = cache.get(key) if cache is not None else None
        cached = found is not None
        if found is None:
            found = _candidates(retriever, principal, query, mode, depth)
            if cache is not None:
                cache.put(key, found)
        warnings.extend(found.warnings)
        ranked = [(d, s) for d, s in found.ranked if d in catalog and catalog[d].name not in exclude]
        if allowed is not None:
            ranked = [(d, s) for d, s in ranked if d in allowed]
        similarity_arm = mode in ("multi-signal", "vector") and found.semantic == "dense"
        if min_similarity is not None:
            if similarity_arm:
                ranked = [(d, s) for d, s in ranked if s >= min_similarity]
            else:
                warnings.append("min_similarity was not applied: only the dense arms (multi-signal, vector) score a "
                                "similarity, and this search ranked by keywords or fused ranks")  # fmt: skip
        raw = dict(ranked)
        if mode == "multi-signal":
            ranked = relative(ranked)
        usage = usage_signal(stats)
        weights = self.config.weights
        hits: list[ToolHit] = []
        for document_id, score in ranked:
            entry = catalog[document_id]
            used, success = usage.get(entry.name, 0.0), success_signal(stats.get(entry.name))
            # The multi-signal score ranks by all three; an arm alone by its own score (the others are shown).
            total = weights[0] * score + weights[1] * used + weights[2] * success if mode == "multi-signal" else score
            similarity = raw[document_id] if similarity_arm else None
            hits.append(ToolHit(entry, total, score, used, success, similarity=similarity))
        hits.sort(key=lambda h: (-h.score, h.entry.name))
        chosen = hits[:top_k]
        critical = (set(self.config.critical) | {e.name for e in catalog.values() if e.critical}) - set(exclude)
        shown = {h.entry.name for h in chosen}
        for hit in chosen:
            hit.critical = hit.entry.name in critical
        for name in sorted(critical - shown):
            if name not in by_name:
                warnings.append(f"critical tool {name!r} is not indexed")
                continue
            chosen.append(ToolHit(by_name[name], 0.0, 0.0, usage.get(name, 0.0), success_signal(stats.get(name)), True))
        return ToolSearchResponse(
            tools=chosen,
            mode=mode,
            semantic=found.semantic,
            cached=cached,
            tokens_loaded=sum(h.entry.tokens for h in chosen),
            tokens_all=sum(e.tokens for e in catalog.values()),
            catalog_tools=len(catalog),
            warnings=warnings,
            seconds=time.perf_counter() - started,
        )


def in_categories(catalog: Mapping[str, CatalogEntry], categories: Collection[str]) -> set[str]:
    """The document ids of the tools tagged with any of ``categories`` (case and surrounding spaces ignored)."""
    wanted = {c.strip().casefold() for c in categories}
    return {
        document_id
        for document_id, entry in catalog.items()
        if wanted & {str(tag).strip().casefold() for tag in entry.definition.get("tags") or ()}
    }


def relative(ranked: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scores over the best one's, clipped at 0: the multi-signal score's semantic signal.

    Relative to the best candidate, so semantic spans 0-1 like usage and success: raw cosines of a small model sit
    in 0.2-0.7, where the other signals' 0-1 swings would outweigh any difference in meaning (MetaTool: nDCG@5
    0.633 with raw cosines, 0.696 relative; docs/notes/tool_search.md). BM25 scores of the keyword fallback have
    no scale of their own either way. Taken after the filters, so the best tool a caller may still get counts 1."""
    best = max((s for _, s in ranked), default=0.0)
    return [(d, max(0.0, s) / best if best > 0 else 0.0) for d, s in ranked]


def _candidates(retriever: Retriever, principal: Principal, query: str, mode: ToolMode, depth: int) -> Candidates:
    """The query's candidates with their arm's own scores (raw cosines in the dense arms), best first, whether the
    dense model answered, and the search's warnings."""
    sources = tool_sources()
    arm = "vector" if mode == "multi-signal" else mode
    response = retriever.search(query, arm, principal, top_k=depth, sources=sources, with_parent_text=False)
    keyword = arm != "bm25" and response.mode == "bm25"
    results = [(r.document_id, float(r.score)) for r in response.results]
    warnings = list(response.warnings)
    if keyword:
        warnings.append("the dense model is unavailable: tools were found by keywords (BM25)")
    return Candidates(results, "keyword" if keyword or arm == "bm25" else "dense", tuple(warnings))
