"""The search use case: one request model in (:class:`~rag_pipeline.serving.schemas.SearchRequest`), one result
out (:class:`ServedSearch`), the same for every face.

The service (:class:`~rag_pipeline.serving.service.SearchService`, shared index, slots and caches), the CLI's
``search`` (an index opened for one query) and the MCP tools all end here, so a search option is written once:
the path scope (a reader's own tree), the min-score default, a rewrite plan, the stage timings and the response
body. The faces only translate: arguments or JSON in, this module's body (or a shorter one) out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rag_pipeline.retrieval.planned_search import Scope, search_planned
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.results import SearchResponse
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.retrieval.rewrite import PlanOutcome
from rag_pipeline.retrieval.tree import ContainerNode, path_scope
from rag_pipeline.serving.schemas import SearchRequest


@dataclass
class ServedSearch:
    """A search's response, how long it waited for the index, its stage timings in milliseconds, and what a
    rewrite plan changed (None: the query was searched as given)."""

    response: SearchResponse
    waited_seconds: float
    reranker: str | None
    timing_ms: dict[str, float] = field(default_factory=dict)
    rewrite: dict[str, object] | None = None
    cached: bool = False  # answered from the result cache (same reader access, same index generation)
    # The request's path holds no container the reader may read: nothing was searched (the CLI refuses it).
    path_outside_tree: bool = False


def min_score_of(request: SearchRequest, default_min_score: float) -> float | None:
    """The request's threshold, else the configured default (RAG_MIN_SCORE; 0: none)."""
    return request.min_score if request.min_score is not None else (default_min_score or None)


def within_path(request: SearchRequest, tree: list[ContainerNode]) -> SearchRequest | None:
    """``request`` narrowed to the reader's own containers under its ``path`` (``tree`` is the reader's tree under
    that path), within any source and container it names; None when no container the reader may read is there.
    A path is always the reader's own tree's, so it can never reach a container they could not see listed."""
    covered = path_scope(tree, request.source, request.container)
    if covered is None:
        return None
    return request.model_copy(update={"path": None, "source": covered[0], "container": covered[1]})


def nothing_under_path(request: SearchRequest) -> ServedSearch:
    """The answer to a path under which the reader may read no container: no results, with the reason."""
    response = SearchResponse(results=[], requested_mode=request.mode, mode=request.mode)
    response.warnings.append(f"no container you may read is under path {request.path!r}")
    return ServedSearch(response=response, waited_seconds=0.0, reranker=None, path_outside_tree=True)


def search_index(
    retriever: Retriever,
    request: SearchRequest,
    reader: Principal,
    *,
    default_min_score: float = 0.0,
    plan: PlanOutcome | None = None,
    waited: float = 0.0,
) -> ServedSearch:
    """Run ``request`` (its path already resolved: :func:`within_path`) on ``retriever`` as ``reader``, following a
    rewrite ``plan`` when one is given; ``waited`` is the time already spent waiting for the index."""
    if request.path is not None:
        raise ValueError("resolve the request's path first (within_path): a path is the reader's own tree's")
    min_score = min_score_of(request, default_min_score)
    rewrite: dict[str, object] | None = None
    if plan is None:
        response = retriever.search(
            request.query,
            request.mode,
            reader,
            top_k=request.top_k,
            sources=request.source,
            containers=request.container,
            authors=request.author,
            updated_from=request.since,
            updated_to=request.until,
            min_score=min_score,
        )
    else:
        scope = Scope(
            tuple(request.source) if request.source else None,
            tuple(request.container) if request.container else None,
            tuple(request.author) if request.author else None,
            request.since,
            request.until,
            min_score,
        )
        planned = search_planned(retriever, request.query, request.mode, reader, request.top_k, plan, scope)
        response, rewrite = planned.response, planned.report()
    reranker = retriever.reranker.name if response.mode == "reranked" and retriever.reranker is not None else None
    return ServedSearch(
        response=response,
        waited_seconds=waited,
        reranker=reranker,
        timing_ms=stage_timing_ms(response, waited),
        rewrite=rewrite,
    )


def stage_timing_ms(response: SearchResponse, waited: float) -> dict[str, float]:
    """The stages a caller is told about, in milliseconds: waiting (for a slot or the index), embedding the query,
    retrieving, reranking and the total."""
    seconds = response.seconds
    embed = seconds.get("embed", 0.0)
    timing = {
        "wait": waited,
        "embed": embed,
        "retrieve": max(0.0, seconds.get("search", 0.0) - embed),
        "rerank": seconds.get("rerank", 0.0),
        "total": seconds.get("total", 0.0) + waited,
    }
    return {k: round(v * 1000, 2) for k, v in timing.items()}


SearchStatus = Literal["success", "no_results", "degraded"]


def search_status(requested_mode: str, mode: str, results_count: int) -> SearchStatus:
    """The search envelope's ``status`` (the design's): ``no_results`` when nothing the reader may read was found,
    ``degraded`` when results came from another mode than the one asked for (the dense model failed: BM25; no
    reranker: hybrid; the warnings say why), else ``success``."""
    if results_count == 0:
        return "no_results"
    return "degraded" if mode != requested_mode else "success"


def search_body(request: SearchRequest, served: ServedSearch, reader: dict[str, Any] | None = None) -> dict[str, Any]:
    """A search's answer as the HTTP API and the CLI's ``--json`` write it; ``reader`` describes who searched (the
    service names the resolved caller)."""
    response = served.response
    count = len(response.results)
    body: dict[str, Any] = {
        "query": request.query,
        "mode": response.mode,
        "requested_mode": response.requested_mode,
        "reranker": served.reranker,
        "warnings": response.warnings,
    }
    if reader is not None:
        body["reader"] = reader
    body.update(
        results=[r.to_dict() for r in response.results],
        timing_ms=served.timing_ms,
        cached=served.cached,
        # The design's envelope (after the fields clients already read, in their order).
        status=search_status(response.requested_mode, response.mode, count),
        results_count=count,
    )
    if served.rewrite is not None:
        body["rewrite"] = served.rewrite
    if response.route is not None:
        body["route"] = response.route
    return body
