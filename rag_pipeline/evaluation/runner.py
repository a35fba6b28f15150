"""Run retrieval arms over an eval set: per-query rankings, latency and ACL leaks.

Each query runs as its principal (or the explicit all-documents evaluation principal), its
``exclude`` ids are dropped before scoring, and any returned document the principal may not read
is counted as a leak. The ``reranked`` arm is scored by rerankers that never saw the query: a model
given by the caller (trained elsewhere), or k-fold cross-fitting on this eval set's own labels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rag_pipeline.evaluation.eval_set import EvalQuery
from rag_pipeline.evaluation.mining.copies import COPY_TAG
from rag_pipeline.evaluation.summary import ArmRun
from rag_pipeline.index.store import ALL_PAYLOAD
from rag_pipeline.retrieval.planned_search import Scope, search_planned
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.rerank.base import Reranker
from rag_pipeline.retrieval.rerank.learned import RerankExample, cross_fit, train_reranker
from rag_pipeline.retrieval.results import Mode, SearchResult
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.retrieval.reuse_ledger import counting_reused
from rag_pipeline.retrieval.rewrite import QueryRewriter

ProgressCallback = Callable[[str, int, int], None]
DEFAULT_DEPTH = 100
# What scoring an arm reads of each result besides its ids: the ACL, to count leaks.
RESULT_FIELDS = ("acl",)
# What an evaluation keeps in memory of every child (``Retriever.shared_work(remember=...)``, the embedded engine):
# whole payloads, so the reranked and prf arms' reads of whole payloads by id skip the engine too (those reads were
# ~2.5 s of a 75 s evaluation; the memory ~40 MB for the bundled index).
KEPT_PAYLOAD = (ALL_PAYLOAD,)


def principal_of(query: EvalQuery) -> Principal:
    """The query's reader; a query judging a masked copy of its thread also holds that copy's own group (no reader
    does: :mod:`rag_pipeline.evaluation.mining.copies`)."""
    principal = query.principal or Principal.all_documents_for_evaluation()
    groups = tuple(t.removeprefix(COPY_TAG) for t in query.tags if t.startswith(COPY_TAG))
    if groups and not principal.all_documents:
        principal = principal.model_copy(update={"groups": (*principal.groups, *groups)})
    return principal


@dataclass
class ArmOutcome:
    """An arm's run plus what happened along the way (degraded searches, rerankers used)."""

    run: ArmRun
    warnings: dict[str, list[str]] = field(default_factory=dict)
    # query id → the best child chunk of each returned document, in rank order (chunk-level scoring)
    chunk_rankings: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    rerankers: set[str] = field(default_factory=set)

    def record(
        self, query_id: str, principal: Principal, results: Sequence[SearchResult], seconds: float, warnings: list[str]
    ) -> None:
        """One query's answer as the metrics read it: the documents and best children in rank order, the latency,
        how many results its reader may not see (leaks), and any warning."""
        self.run.rankings[query_id] = [(r.document_id, r.score) for r in results]
        self.chunk_rankings[query_id] = [(r.child_id, r.score) for r in results]
        self.run.latency_ms[query_id] = seconds * 1000.0
        self.run.leaks[query_id] = sum(not principal.admits(r.acl) for r in results)
        if warnings:
            self.warnings[query_id] = warnings


def run_arm(
    retriever: Retriever,
    arm: Mode,
    queries: Sequence[EvalQuery],
    depth: int = DEFAULT_DEPTH,
    sources: Sequence[str] | None = None,
    rerankers: Mapping[str, Reranker] | Reranker | None = None,
    name: str | None = None,
    progress: ProgressCallback | None = None,
) -> ArmOutcome:
    """Search every query with one arm. ``rerankers`` maps query id → reranker (cross-fitting) or is one
    reranker for all; latency excludes query embedding (the cache is warmed in one batch first) and includes what
    work reused from other arms first cost (:mod:`~rag_pipeline.retrieval.reuse_ledger`)."""
    name = name or arm
    retriever.embed_queries([q.query for q in queries])
    outcome = ArmOutcome(ArmRun(arm=name, rankings={}, latency_ms={}, leaks={}))
    if progress:
        progress(name, 0, len(queries))  # starting now: the rate counts from here
    for i, query in enumerate(queries, start=1):
        principal = principal_of(query)
        reranker = rerankers.get(query.id) if isinstance(rerankers, Mapping) else rerankers
        started = time.perf_counter()
        with counting_reused() as reused:
            response = retriever.search(
                query.query,
                arm,
                principal,
                top_k=depth,
                sources=sources,
                exclude=query.exclude,
                with_parent_text=False,
                reranker=reranker,
                payload_fields=RESULT_FIELDS,
            )
        # Work reused from another arm or from the training candidates counts as what it cost: a served search
        # does all of it.
        elapsed = time.perf_counter() - started - response.seconds.get("embed", 0.0) + reused()
        outcome.record(query.id, principal, response.results, elapsed, response.warnings)
        if reranker is not None and response.mode == "reranked":
            outcome.rerankers.add(reranker.name)
        if progress:
            progress(name, i, len(queries))
    return outcome


def rerank_examples(
    retriever: Retriever,
    queries: Sequence[EvalQuery],
    depth: int | None = None,
    sources: Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
) -> list[RerankExample]:
    """Hybrid candidates (with signals and parent text) of labelled queries, labelled from ``relevant``."""
    retriever.embed_queries([q.query for q in queries])
    examples = []
    if progress:
        progress("reranker training data", 0, len(queries))
    for i, query in enumerate(queries, start=1):
        candidates = retriever.rerank_candidates(
            query.query, principal_of(query), depth, exclude=query.exclude, sources=sources
        )
        labels = [max(int(query.relevant.get(c.document_id, 0)), 0) for c in candidates]
        examples.append(RerankExample(query.id, query.query, candidates, labels))
        if progress:
            progress("reranker training data", i, len(queries))
    return examples


def cross_fitted_rerankers(
    retriever: Retriever,
    queries: Sequence[EvalQuery],
    folds: int = 5,
    sources: Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
    cache_dir: Path | None = None,
) -> dict[str, Reranker]:
    """Query id → a learned reranker that never trained on the query's text (k-fold over texts); fold models
    trained before on the same data come from ``cache_dir``.

    Queries without labels (e.g. ACL queries of a principal with nothing relevant) get the model of
    their text's fold too, so a repeated text is never scored by a model that saw it.
    """
    labelled = [q for q in queries if q.judged]
    if not labelled:
        return {}
    examples = rerank_examples(retriever, labelled, sources=sources, progress=progress)
    fitted = cross_fit(
        examples,
        folds=folds,
        encoder=retriever.bm25,
        progress=(lambda done, total: progress("training cross-fitted rerankers", done, total)) if progress else None,
        cache_dir=cache_dir,
    )
    return {q.id: fitted.for_query(q.query) for q in queries}


# The reranked arm as a company would run it: models trained on earlier weeks only, scoring later weeks (mined sets,
# whose queries carry ``week:`` tags). The weeks are cut into TEMPORAL_BLOCKS chronological blocks; block i is
# scored by a model trained on blocks 0..i-1, and the first block by none (the hybrid order: there was no past yet).
TEMPORAL_ARM = "reranked_by_week"
TEMPORAL_BLOCKS = 5
WEEK_TAG = "week:"


def query_week(query: EvalQuery) -> str | None:
    return next((t.removeprefix(WEEK_TAG) for t in query.tags if t.startswith(WEEK_TAG)), None)


def dated(queries: Sequence[EvalQuery]) -> bool:
    """Whether every query says its week (a mined set): only then can a model be trained on the past alone."""
    return bool(queries) and all(query_week(q) for q in queries)


def week_blocks(queries: Sequence[EvalQuery], blocks: int = TEMPORAL_BLOCKS) -> list[list[EvalQuery]]:
    """The queries in chronological blocks of whole weeks (about equal in queries; a week is never split)."""
    weeks = sorted({query_week(q) or "" for q in queries})
    by_week: dict[str, list[EvalQuery]] = {w: [] for w in weeks}
    for q in queries:
        by_week[query_week(q) or ""].append(q)
    # A week goes to the block its first query's position falls in (the blocks cut the queries into equal shares).
    count = max(1, min(blocks, len(weeks)))
    out: list[list[EvalQuery]] = [[] for _ in range(count)]
    before = 0
    for week in weeks:
        out[min(count - 1, before * count // len(queries))].extend(by_week[week])
        before += len(by_week[week])
    out = [block for block in out if block]
    return out


def temporal_rerankers(
    retriever: Retriever,
    queries: Sequence[EvalQuery],
    blocks: int = TEMPORAL_BLOCKS,
    sources: Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
    cache_dir: Path | None = None,
) -> dict[str, Reranker]:
    """Query id → a learned reranker trained only on queries of earlier weeks (none for the first block). The
    training never sees a later week: the honest split for a company that trains on its past."""
    chunks = week_blocks(queries, blocks)
    labelled = {q.id for q in queries if q.judged}
    examples = {
        e.query_id: e for e in rerank_examples(retriever, [q for q in queries if q.id in labelled], sources=sources)
    }
    out: dict[str, Reranker] = {}
    past: list[RerankExample] = []
    for i, block in enumerate(chunks):
        if past:
            model = train_reranker(past, trained_on=f"weeks before {query_week(block[0])}", encoder=retriever.bm25,
                                   cache_dir=cache_dir)  # fmt: skip
            out.update({q.id: model for q in block})
        past += [examples[q.id] for q in block if q.id in examples]
        if progress:
            progress("training on earlier weeks", i + 1, len(chunks))
    return out


REWRITTEN_ARM = "rewritten"


def run_rewritten_arm(
    retriever: Retriever,
    rewriter: QueryRewriter,
    queries: Sequence[EvalQuery],
    depth: int = DEFAULT_DEPTH,
    sources: Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
) -> ArmOutcome:
    """The ``rewritten`` arm: each query planned by the rewrite model (cached per day) and searched with the plan
    (hybrid, sub-queries merged by RRF), as its reader. Latency includes the plan (a cache hit costs ~0.1 ms)."""
    outcome = ArmOutcome(ArmRun(arm=REWRITTEN_ARM, rankings={}, latency_ms={}, leaks={}))
    scope = Scope(sources=tuple(sources) if sources else None)
    if progress:
        progress(REWRITTEN_ARM, 0, len(queries))
    for i, query in enumerate(queries, start=1):
        principal = principal_of(query)
        started = time.perf_counter()
        plan = rewriter.plan(query.query)
        planned = search_planned(retriever, query.query, "hybrid", principal, depth, plan, scope, tuple(query.exclude))
        elapsed = time.perf_counter() - started - planned.response.seconds.get("embed", 0.0)
        warnings = list(planned.response.warnings)
        if planned.fallback_reason:
            warnings.append(planned.fallback_reason)
        outcome.record(query.id, principal, planned.response.results, elapsed, warnings)
        if progress:
            progress(REWRITTEN_ARM, i, len(queries))
    return outcome
