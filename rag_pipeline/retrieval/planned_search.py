"""Searching with a rewrite plan: every query of the plan (the refined query with its expansions, then each
sub-query) searched as the same reader, the lists merged per document by reciprocal rank fusion.

The plan's filters apply only when its confidence reaches :data:`~rag_pipeline.retrieval.rewrite.FILTER_CONFIDENCE`
and only where the request set none of its own; a filter that would leave nothing is dropped, and the
response says so. Without a plan (no rewrite model, or a fallback), this is one ordinary search.

A ``routed`` search with a plan is routed once, from the question and its plan (:func:`~rag_pipeline.retrieval.
router.plan_route`), and every query of the plan follows that route: the question's identifiers are looked up
even where the rewrite dropped them, and the plan's unsure source or date becomes a hint, not a filter.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.results import Mode, SearchResponse, SearchResult
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.retrieval.rewrite import FILTER_CONFIDENCE, Filters, PlanOutcome, QueryPlan
from rag_pipeline.retrieval.router import Route, plan_route

RRF_K = 60


@dataclass(frozen=True)
class Scope:
    """The filters a request gave itself (they always win over a plan's)."""

    sources: tuple[str, ...] | None = None
    containers: tuple[str, ...] | None = None
    authors: tuple[str, ...] | None = None
    since: str | None = None
    until: str | None = None
    min_score: float | None = None  # on the calibrated relevance scale (retrieval/calibration.py)


@dataclass
class PlannedSearch:
    """The merged response, the plan behind it, and what of the plan was used."""

    response: SearchResponse
    plan: QueryPlan | None
    fallback_reason: str | None = None
    queries: list[str] = field(default_factory=list)
    filters_applied: dict[str, object] = field(default_factory=dict)
    dropped_filters: list[str] = field(default_factory=list)
    rewrite_cached: bool = False
    rewrite_seconds: float = 0.0

    def report(self) -> dict[str, object]:
        """What a response says about the rewrite."""
        return {
            "plan": self.plan.as_dict() if self.plan else None,
            "fallback_reason": self.fallback_reason,
            "queries": self.queries,
            "filters_applied": self.filters_applied,
            "dropped_filters": self.dropped_filters,
            "cached": self.rewrite_cached,
            "seconds": round(self.rewrite_seconds, 4),
        }


def merge_by_rrf(lists: Iterable[list[SearchResult]], top_k: int) -> list[SearchResult]:
    """One list from several: each document scored Σ 1 / (60 + rank) over the lists it is in (rank from 1),
    keeping its best-ranked hit's chunk."""
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, SearchResult]] = {}
    for results in lists:
        for rank, result in enumerate(results, start=1):
            scores[result.document_id] = scores.get(result.document_id, 0.0) + 1.0 / (RRF_K + rank)
            if result.document_id not in best or rank < best[result.document_id][0]:
                best[result.document_id] = (rank, result)
    ordered = sorted(scores, key=lambda d: (-scores[d], d))[:top_k]
    return [replace(best[d][1], score=scores[d]) for d in ordered]


def _plan_filters(plan: QueryPlan, scope: Scope) -> Filters | None:
    """The plan's filters the search may use: sure enough, and only where the request set none."""
    if plan.confidence < FILTER_CONFIDENCE or plan.filters.is_empty():
        return None
    f = plan.filters
    chosen = Filters(
        since=f.since if scope.since is None else None,
        until=f.until if scope.until is None else None,
        authors=f.authors if scope.authors is None else (),
        sources=f.sources if scope.sources is None else (),
    )
    return None if chosen.is_empty() else chosen


def search_planned(
    retriever: Retriever,
    question: str,
    mode: Mode,
    principal: Principal,
    top_k: int,
    outcome: PlanOutcome,
    scope: Scope = Scope(),
    exclude: tuple[str, ...] = (),
) -> PlannedSearch:
    """Search ``question`` as ``principal`` following ``outcome``'s plan (one plain search without one)."""
    started = time.perf_counter()

    def run(query: str, extra: Filters | None) -> SearchResponse:
        return retriever.search(
            query,
            mode,
            principal,
            top_k=top_k,
            sources=(extra.sources if extra and extra.sources else None) or scope.sources,
            containers=scope.containers,
            authors=(extra.authors if extra and extra.authors else None) or scope.authors,
            updated_from=(extra.since if extra else None) or scope.since,
            updated_to=(extra.until if extra else None) or scope.until,
            exclude=exclude,
            min_score=scope.min_score,
            route=route,
        )

    plan = outcome.plan
    route: Route | None = plan_route(question, plan=plan) if plan is not None and mode == "routed" else None
    if plan is None:
        response = run(question, None)
        return PlannedSearch(response, None, outcome.fallback_reason, [question], {}, [], outcome.cached,
                             outcome.seconds)  # fmt: skip
    queries = plan.queries() or [question]
    filters = _plan_filters(plan, scope)
    dropped: list[str] = []
    responses = [run(q, filters) for q in queries]
    if filters is not None and not any(r.results for r in responses):
        dropped = [f"{name}={value}" for name, value in filters.as_dict().items() if value]
        responses = [run(q, None) for q in queries]
        filters = None
    first = responses[0]
    merged = SearchResponse(
        results=merge_by_rrf([r.results for r in responses], top_k),
        requested_mode=first.requested_mode,
        mode=first.mode,
        warnings=list(dict.fromkeys(w for r in responses for w in r.warnings)),
        # Each stage summed over the plan's searches, so a planned search reports its embedding and reranking
        # time (and its total) like a plain one does.
        seconds=_planned_seconds(responses, time.perf_counter() - started, outcome.seconds),
        fusion=first.fusion,
        route=first.route,
    )
    applied = {k: v for k, v in filters.as_dict().items() if v} if filters else {}
    return PlannedSearch(merged, plan, None, queries, applied, dropped, outcome.cached, outcome.seconds)


def _planned_seconds(responses: list[SearchResponse], elapsed: float, rewrite: float) -> dict[str, float]:
    """A planned search's stage seconds as a plain one reports them: embedding and reranking summed over the plan's
    searches, ``search`` the rest up to the reranking (as a plain search's is), ``total`` all of it."""
    embed = sum(r.seconds.get("embed", 0.0) for r in responses)
    rerank = sum(r.seconds.get("rerank", 0.0) for r in responses)
    return {"search": max(0.0, elapsed - rerank), "embed": embed, "rerank": rerank, "rewrite": rewrite,
            "total": elapsed}  # fmt: skip
