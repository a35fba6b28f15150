"""The five retrieval arms over a :class:`VectorStore`: vector, bm25, hybrid, reranked and prf.

Every arm searches child chunks with the principal's ACL in the query (and, for hybrid, in every
prefetch), then maps children to parents and documents (small-to-big). When the dense model or
the dense index is unavailable, dense arms degrade to BM25 with a warning instead of failing. ``prf``
expands the BM25 query with terms of the reader's own first BM25 results (RM3, :mod:`.prf`) and searches again,
as hybrid with the expanded sparse side (or BM25 alone, ``PrfConfig.hybrid=False``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, Field

from rag_pipeline.index.store import (
    DENSE_VECTOR,
    TITLE_VECTOR,
    DensePrefetch,
    Fusion,
    Hit,
    SearchFilter,
    VectorStore,
)
from rag_pipeline.retrieval.calibration import CalibrationFile
from rag_pipeline.retrieval.fusion import (
    OTHER_SOURCES,
    QUERY_ON_TITLES,
    TITLE_LINE_ON_CHUNKS,
    TITLE_LINE_ON_TITLES,
    HybridPlan,
    SourceFusion,
)
from rag_pipeline.retrieval.fusion import learned_fusion as learned_fusions
from rag_pipeline.retrieval.grouping import GROUPING_FIELDS, document_scores, documents_from_hits, read_payload
from rag_pipeline.retrieval.prf import Expansion, FeedbackDocument, PrfConfig, rm3
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.query_cache import QueryEmbeddingCache
from rag_pipeline.retrieval.query_text import split_query
from rag_pipeline.retrieval.rerank.base import Reranker, rerank
from rag_pipeline.retrieval.rerank.features import features_kept
from rag_pipeline.retrieval.results import SEARCH_MODES, Mode, SearchResponse, SearchResult
from rag_pipeline.retrieval.reuse_ledger import note_reused
from rag_pipeline.retrieval.router import Route, plan_route
from rag_pipeline.retrieval.sparse_query import (
    DEFAULT_SPARSE_QUERY,
    SPARSE_QUERY_PRESETS,
    SparseQueryConfig,
    sparse_query,
)
from rag_pipeline.sources.registry import tool_sources
from rag_pipeline.text.clean import query_form
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.sparse import Bm25Encoder, SparseVector

log = logging.getLogger(__name__)

# BM25 hits of an issue key searched for the issue whose link ends in that key (its title starts with the key).
EXACT_KEY_DEPTH = 20

# Qdrant returns equal scores in a per-process order (its fusion uses a randomly seeded hash map), so
# which tied hits make the cut at ``limit`` would differ between runs. Fetch a few more, order ties by
# id, and cut here: evaluations then repeat exactly.
TIE_MARGIN = 16


# The rerank signals rank documents by their children's scores: the document id is all they read of a payload.
SIGNAL_FIELDS = ("document_id",)


def _cut(hits: list[Hit], limit: int) -> list[Hit]:
    """The ``limit`` best hits, equal scores at the boundary going to the smaller id (the engine breaks ties in no
    fixed order). In no particular order: grouping and the signals do not depend on it. Only the boundary's ties
    are sorted (sorting every deep list by a key was ~1.5 s of an evaluation's ~3 million hits)."""
    if len(hits) <= limit:
        return hits
    boundary = sorted([h.score for h in hits], reverse=True)[limit - 1]
    head = [h for h in hits if h.score > boundary]
    ties = sorted((h for h in hits if h.score == boundary), key=lambda h: h.id)
    return head + ties[: limit - len(head)]


# Candidates each list of a hybrid search fetches. At a million children a broad reader's multi-line query fuses
# five lists of 100; 50 a list answers a little faster there (docs/notes/search_at_scale.md: served hybrid p50/p95
# 83/136 -> 76/122 ms, in-process 65 -> 62 ms p50 with the arms' order rotated) and costs nothing measurable at the
# served top 10 on the bundled sets (bench/experiments/prefetch_depth.py: nDCG@10 +0.003 Jira, 0 Slack, -0.015 ACL
# set, no paired randomization test rejecting: p 0.21 / 1.0 / 0.25); below the threshold the evaluated default stays.
DEFAULT_PREFETCH = 100
LARGE_INDEX_PREFETCH = 50
LARGE_INDEX_CHILDREN = 500_000


class RetrieverConfig(BaseModel):
    """Search depths and fusion. Defaults are the settings the evaluation reports."""

    # Child hits are grouped into documents, so a search fetches several children per wanted result.
    # Fetching payloads is most of a query's cost in the embedded engine (≈25 µs per hit), which is
    # why the depth scales with top_k instead of being fixed high.
    child_depth: int = Field(50, ge=1, description="minimum child chunks fetched per search before grouping")
    children_per_result: int = Field(4, ge=1, description="child depth is at least (top_k + excluded) × this")
    prefetch_limit: int | None = Field(
        None,
        ge=1,
        description="minimum candidates per list of a hybrid search (None: 100, or 50 on an index of more than "
        "large_index_children child chunks)",
    )
    large_index_children: int = Field(
        LARGE_INDEX_CHILDREN, ge=1, description="child chunks above which an index is large (fewer candidates)"
    )
    fusion_method: str = Field("rrf", pattern="^(rrf|dbsf)$")
    rrf_k: int = Field(60, ge=1)
    rrf_weights: tuple[float, ...] | None = Field(None, description="(dense, sparse) weights for weighted RRF")
    max_child_depth: int = Field(4000, ge=1, description="child depth is doubled up to this to fill top_k documents")
    rerank_depth: int = Field(50, ge=1, description="hybrid documents the reranker rescores")
    signal_depth: int = Field(400, ge=1, description="children searched among the candidates for rerank signals")
    sparse_query: SparseQueryConfig = Field(
        default_factory=lambda: SPARSE_QUERY_PRESETS[DEFAULT_SPARSE_QUERY],
        description="how the BM25 and hybrid arms turn a query into BM25 terms",
    )
    prf: PrfConfig = Field(default_factory=PrfConfig, description="how the prf arm expands a query (RM3)")
    fusion_by_source: dict[str, SourceFusion] = Field(
        default_factory=learned_fusions,
        description="source → fusion of hybrid searches limited to that source; '*' for every other search "
        "(empty: the global fusion)",
    )

    @classmethod
    def chosen(
        cls,
        sparse_query: str = DEFAULT_SPARSE_QUERY,
        learned_fusion: bool = True,
        language: str = "english",
        **fields: Any,
    ) -> RetrieverConfig:
        """A config from the named settings (RAG_SPARSE_QUERY, RAG_LEARNED_FUSION) and the language the index
        was built for (its learned fusions differ), plus any other fields."""
        if sparse_query not in SPARSE_QUERY_PRESETS:
            raise ValueError(
                f"unknown sparse query {sparse_query!r}; expected one of {', '.join(SPARSE_QUERY_PRESETS)}"
            )
        return cls(
            sparse_query=SPARSE_QUERY_PRESETS[sparse_query],
            fusion_by_source=learned_fusions(language) if learned_fusion else {},
            **fields,
        )

    def prefetch_for(self, children: Callable[[], int]) -> int:
        """Candidates per hybrid list over an index of ``children()`` child chunks: the configured number (the
        index is not counted then), else fewer on a large index."""
        if self.prefetch_limit is not None:
            return self.prefetch_limit
        return LARGE_INDEX_PREFETCH if children() > self.large_index_children else DEFAULT_PREFETCH

    @property
    def fusion(self) -> Fusion:
        return Fusion(method=self.fusion_method, k=self.rrf_k, weights=self.rrf_weights)  # type: ignore[arg-type]

    def learned_for(self, sources: Sequence[str] | None) -> SourceFusion | None:
        """A one-source search uses that source's learned fusion, other searches the learned ``*`` entry;
        None without learned fusions (or without an entry)."""
        learned = None
        if sources is not None and len(set(sources)) == 1:
            learned = self.fusion_by_source.get(next(iter(sources)))
        return learned or self.fusion_by_source.get(OTHER_SOURCES)

    def fusion_for(self, sources: Sequence[str] | None) -> Fusion:
        """The fusion a search over ``sources`` reports: the learned one with every list it may add, or the
        global one."""
        learned = self.learned_for(sources)
        return learned.fusion if learned is not None else self.fusion

    def plan_for(self, sources: Sequence[str] | None, title_line: bool, title_vectors: bool) -> HybridPlan:
        """What a hybrid search over ``sources`` fuses, for a query with or without a title line over an
        index with or without document title vectors."""
        learned = self.learned_for(sources)
        return learned.plan(title_line, title_vectors) if learned is not None else HybridPlan(self.fusion)


def _dense_encoder(dense: DenseEncoder | Callable[[], DenseEncoder]) -> DenseEncoder:
    """The encoder itself, or what the zero-argument loader returns."""
    if hasattr(dense, "encode_queries"):
        return cast(DenseEncoder, dense)
    return dense()


class Retriever:
    """Runs searches as a principal. ``dense`` may be an encoder or a zero-argument loader (loaded on
    first use, so a missing model only degrades dense arms); ``query_cache`` an existing query-embedding
    cache of that encoder."""

    def __init__(
        self,
        store: VectorStore,
        bm25: Bm25Encoder | None = None,
        dense: DenseEncoder | Callable[[], DenseEncoder] | None = None,
        reranker: Reranker | None = None,
        config: RetrieverConfig | None = None,
        cache_size: int = 4096,
        cache_ttl_seconds: float = 3600.0,
        persistent_cache: EmbeddingCache | None = None,
        query_cache: QueryEmbeddingCache | None = None,
        calibration: CalibrationFile | None = None,
    ) -> None:
        self.store = store
        self.calibration = calibration
        self.bm25 = bm25 or Bm25Encoder()
        self._dense = dense
        # A cache handed in (a long-lived reader's) outlives this retriever; otherwise one is made on first use.
        self._cache: QueryEmbeddingCache | None = query_cache
        self._dense_error: str | None = None
        self.reranker = reranker
        self.config = config or RetrieverConfig()
        self._cache_args = (cache_size, cache_ttl_seconds)
        self._persistent_cache = persistent_cache
        # Within ``shared_work()`` (an evaluation's arms): first-stage documents, rerank signals and parent texts
        # by what they were computed from; None outside it.
        self._shared: SharedWork | None = None
        self._child_count: int | None = None

    @contextmanager
    def shared_work(self, remember: Sequence[str] = ()) -> Iterator[None]:
        """Within the block, a first-stage search, a candidate list's rerank signals and a parent's text that were
        computed once are reused instead of computed again (issue 48): an evaluation's reranked arm asks for the
        hybrid candidates its training data already searched, and for the deeper hybrid list the hybrid arm
        searched. The engine is deterministic, so the figures are those of computing again; each caller gets its
        own copies (arms change scores and signals in place). ``remember``: payload fields the block's searches read
        of their results besides grouping's (an evaluation's leak check: the ACL), kept in memory with them."""
        # A block inside another (an arm's run_arms inside its eval set's block) shares the outer block's work.
        previous, self._shared = self._shared, self._shared or SharedWork()
        # Thousands of deep searches over one open store: the embedded engine keeps what they read in memory.
        self.store.remember_fields((*GROUPING_FIELDS, *remember))
        try:
            with features_kept():
                yield
        finally:
            self._shared = previous

    # --- query embedding -------------------------------------------------------------------------
    @property
    def query_cache(self) -> QueryEmbeddingCache | None:
        if self._cache is None and self._dense is not None and self._dense_error is None:
            try:
                encoder = _dense_encoder(self._dense)
                size, ttl = self._cache_args
                self._cache = QueryEmbeddingCache(encoder, size, ttl, persistent=self._persistent_cache)
            except Exception as exc:  # any load failure degrades to BM25
                self._dense_error = f"dense model could not be loaded ({type(exc).__name__}: {exc})"
        return self._cache

    def embed_queries(self, queries: Sequence[str]) -> dict[str, np.ndarray]:
        """Warm the query cache in one batch (evaluation embeds all its queries up front), title lines too
        (the reranker's title signals search with them); the vectors by text ({} without a dense model)."""
        if self.query_cache is None:
            return {}
        titles = [t for t in (split_query(q).title for q in queries) if t]
        texts = list(dict.fromkeys([*queries, *titles]))
        return dict(zip(texts, self.query_cache.get_many(texts), strict=True))

    def _children(self) -> int:
        """Child chunks in the index, counted once per retriever (a retriever lives for one opening of the index;
        the size only picks a default, so a count a few writes old is good enough)."""
        if self._child_count is None:
            self._child_count = self.store.count(self.store.names.children)
        return self._child_count

    def _query_vector(self, query: str) -> list[float]:
        cache = self.query_cache
        if cache is None:
            raise RuntimeError(self._dense_error or "no dense model configured")
        return [float(x) for x in cache.get(query)]

    # --- search ----------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        mode: Mode = "hybrid",
        principal: Principal | None = None,
        top_k: int = 10,
        sources: Iterable[str] | None = None,
        containers: Iterable[str] | None = None,
        updated_from: str | None = None,
        updated_to: str | None = None,
        min_score: float | None = None,
        exclude: Iterable[str] = (),
        authors: Iterable[str] | None = None,
        with_parent_text: bool = True,
        reranker: Reranker | None = None,
        payload_fields: Sequence[str] | None = None,
        route: Route | None = None,
    ) -> SearchResponse:
        """Search as ``principal`` (required: use ``Principal.all_documents_for_evaluation()`` to skip ACLs) for
        the ``top_k`` best documents (at least 1); ``authors`` keeps documents by any of them. ``payload_fields``:
        only these fields of each result's child are read (an evaluation's leak check reads the ACL alone); None:
        all of them. ``route``: a ``routed`` search's route when the caller planned it already (a rewrite plan's
        queries share the question's route); None: the query's own words route it."""
        if principal is None:
            raise ValueError("a search needs a principal (user id + groups); evaluation passes the all-documents one")
        # Every face ends here (service, MCP, CLI, chat, the evaluation): one place to read the query in the index's
        # form, so NFD Korean typed on a Mac finds what NFC finds.
        query = query_form(query)
        if not query.strip():
            raise ValueError("query is empty")
        if top_k < 1:
            # A slice would take it: top_k=-1 returned every result but the last.
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        exclude = tuple(exclude)
        sources = tuple(sources) if sources else None
        flt = search_filter(principal, sources, containers, updated_from, updated_to, authors)
        response = SearchResponse(results=[], requested_mode=mode, mode=mode)
        response.fusion = self.config.fusion_for(sources)
        started = time.perf_counter()
        if mode not in SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}; expected one of {', '.join(SEARCH_MODES)}")
        if mode == "prf":
            expansion = self._expand(query, flt, exclude, response)
            inner = "hybrid" if self.config.prf.hybrid else "bm25"
            docs = self._documents(inner, query, top_k, flt, exclude, response, sparse=expansion.query)
            response.seconds["search"] = time.perf_counter() - started
        elif mode == "routed":
            docs = self._routed(query, top_k, flt, exclude, response, route)
            response.seconds["search"] = time.perf_counter() - started
        elif mode == "reranked":
            response.mode = "hybrid"
            # The head is searched exactly as the training candidates were (rerank_candidates): a deeper
            # search fuses longer prefetch lists, which changes the candidates and their hybrid signals.
            docs = self._documents("hybrid", query, self.config.rerank_depth, flt, exclude, response)
            if top_k > self.config.rerank_depth and response.mode == "hybrid":
                head = {d.document_id for d in docs[: self.config.rerank_depth]}
                wider = self._documents("hybrid", query, top_k, flt, exclude, response)
                docs = docs[: self.config.rerank_depth] + [d for d in wider if d.document_id not in head]
            response.seconds["search"] = time.perf_counter() - started
            chosen = reranker or self.reranker
            if chosen is None:
                response.warnings.append("no reranker configured: reranked results are the hybrid ranking")
            elif response.mode == "hybrid":
                reranked = self._rerank(chosen, query, docs, flt, response, exclude)
                if reranked is not None:
                    docs, response.mode = reranked, "reranked"
        else:
            docs = self._documents(mode, query, top_k, flt, exclude, response)
            response.seconds["search"] = time.perf_counter() - started
        docs = self._calibrated(docs, response, min_score, self._calibration_key(response, reranker))[:top_k]
        self._hydrate(docs, payload_fields)
        if with_parent_text:
            self._attach_parent_text(docs)
        response.results = docs
        response.seconds["total"] = time.perf_counter() - started
        return response

    def _routed(
        self,
        query: str,
        top_k: int,
        flt: SearchFilter,
        exclude: Sequence[str],
        response: SearchResponse,
        planned: Route | None = None,
    ) -> list[SearchResult]:
        """The search router's route (retrieval/router.py): exact identifiers first, then the strategy's search,
        the named source's documents before the others, within the date hint's window when it leaves any."""
        route = planned if planned is not None else plan_route(query)
        response.route = route.describe()
        exact = self._exact_documents(route, query, flt, exclude, response)
        skip = (*exclude, *(d.document_id for d in exact))
        inner = route.strategy
        windowed = replace(flt, updated_from=route.since()) if route.since_days and not flt.updated_from else None
        # Inside the window the date words were said: searched for, they match every thread that says "어제".
        docs = self._documents(inner, route.text or query, top_k, windowed, skip, response) if windowed else []
        if not docs:
            if windowed is not None:
                response.warnings.append("the question's date hint left no document: searched without it")
            docs = self._documents(inner, query, top_k, flt, skip, response)
        if route.source is not None:  # stable: the named source's documents first, each side in its order
            docs = sorted(docs, key=lambda d: d.source != route.source)
        if route.container is not None:  # the named channel's documents first (its name is in the title)
            self._hydrate(docs)
            docs = sorted(docs, key=lambda d: not route.names_container(d.title, d.container))
        # response.mode stays "routed" unless the dense model failed (then "bm25", a degraded search).
        return exact + docs

    def _exact_documents(
        self, route: Route, query: str, flt: SearchFilter, exclude: Sequence[str], response: SearchResponse
    ) -> list[SearchResult]:
        """The documents the question names exactly, that the reader may read (the filter keeps the ACL):
        by link or id through a filtered search of those documents only, by issue key through a BM25 search of
        the key whose hits must link to exactly that issue."""
        found: dict[str, SearchResult] = {}
        mode = "bm25" if response.mode == "bm25" else "vector"
        # bm25/vector lists: _documents keeps none of them in an evaluation's shared work (only hybrid ones).
        for url in route.urls:
            linked = replace(flt, extra={**flt.extra, "url": url})
            for doc in self._documents(mode, query, 1, linked, exclude, response):
                found.setdefault(doc.document_id, doc)
        if route.document_ids:
            named = replace(flt, document_ids=route.document_ids)
            for doc in self._documents(mode, query, len(route.document_ids), named, exclude, response):
                found.setdefault(doc.document_id, doc)
        for key in route.issue_keys:
            suffix = f"/browse/{key}".lower()
            keyed = self._documents("bm25", key, EXACT_KEY_DEPTH, flt, exclude, response)
            self._hydrate(keyed)  # the link says which issue a hit is
            for doc in keyed:
                if (doc.url or "").lower().endswith(suffix):
                    found.setdefault(doc.document_id, doc)
        ranked = list(found.values())
        top = max((d.score for d in ranked), default=0.0)
        for i, doc in enumerate(ranked):  # above anything a search scores: an exact match is the answer
            doc.signals["exact"] = 1.0
            doc.score = top + 1000.0 - i
        return ranked

    def _calibration_key(self, response: SearchResponse, reranker: Reranker | None) -> str:
        """Whose calibration a response's scores take: the mode that ran; a routed search's strategy (its exact
        hits are certain); a reranked one's reranker only when it is the kind the evaluation calibrated (the
        learned one), so an LLM's 0-10 grades never go through the learned model's map."""
        if response.mode == "routed" and response.route is not None:
            return str(response.route.get("strategy") or "hybrid")
        if response.mode == "reranked":
            chosen = reranker or self.reranker
            calibrated_as = getattr(chosen, "calibrated_as", None)
            return str(calibrated_as) if calibrated_as else f"reranked:{getattr(chosen, 'name', '?')}"
        return str(response.mode)

    def _calibrated(
        self, docs: list[SearchResult], response: SearchResponse, min_score: float | None, key: str
    ) -> list[SearchResult]:
        """Each result's relevance (P(relevant) for the scores of ``key``), and only those at ``min_score`` or
        above. Without a calibration for it (no evaluation yet), nothing is dropped and a warning says so."""
        calibration = self.calibration.current() if self.calibration is not None else None
        fitted = calibration.modes.get(key) if calibration is not None else None
        if fitted is None:
            if min_score:
                response.warnings.append(
                    f"min_score {min_score:g} not applied: no calibration for mode {key} yet "
                    "(the evaluation writes one)"
                )
            return docs
        for doc in docs:
            # An exact identifier match (the routed mode) is the document named: certain, whatever its score.
            doc.relevance = 1.0 if doc.signals.get("exact") else fitted.relevance(doc.score)
        if min_score:
            return [d for d in docs if d.relevance is not None and d.relevance >= min_score]
        return docs

    def _documents(
        self,
        mode: str,
        query: str,
        want: int,
        flt: SearchFilter,
        exclude: Sequence[str],
        response: SearchResponse,
        sparse: SparseVector | None = None,
    ) -> list[SearchResult]:
        """At least ``want`` documents (after exclusions) when the index has them: children are grouped
        into documents, so the child depth doubles until enough documents remain or the index runs dry.
        ``sparse`` replaces the query's BM25 vector (an expanded query)."""

        def search() -> list[SearchResult]:
            depth = max(self.config.child_depth, (want + len(exclude)) * self.config.children_per_result)
            while True:
                if mode == "bm25" or response.mode == "bm25":
                    hits = self._bm25_hits(query, depth, flt, sparse)
                else:
                    hits = self._dense_hits(mode, query, depth, flt, response, sparse)
                docs = documents_from_hits(hits, exclude, complete=False)
                if len(docs) >= want or len(hits) < depth or depth >= self.config.max_child_depth:
                    return docs
                depth = min(depth * 2, self.config.max_child_depth)

        # Only hybrid lists are asked for twice (the reranked arm's head and its deeper list); the other arms' are not
        # kept, so the memory holds what is reused.
        shared = self._shared if sparse is None and mode == "hybrid" else None
        if shared is None:  # a served search or a non-hybrid list: nothing kept, no key built
            return search()
        key = (mode, query, want, repr(flt), tuple(exclude), response.mode)
        if key in shared.documents:
            kept, seconds = shared.documents[key]
            note_reused(seconds)
            return _copies(kept)
        warnings_before = len(response.warnings)
        started = time.perf_counter()
        docs = search()
        # Kept only when nothing degraded on the way (a dense failure switches the response to BM25 and warns).
        if response.mode == key[-1] and len(response.warnings) == warnings_before:
            shared.documents[key] = (_copies(docs), time.perf_counter() - started)
        return docs

    def sparse_query(self, query: str) -> SparseVector:
        """The BM25 query vector every arm uses (weighted as ``config.sparse_query`` says)."""
        return sparse_query(self.bm25, query, self.config.sparse_query)

    def _expand(self, query: str, flt: SearchFilter, exclude: Sequence[str], response: SearchResponse) -> Expansion:
        """The feedback search (BM25 under the search's own filter and ACL, leaving out ``exclude``) and the RM3
        query from it: nothing the reader may not read, or the search leaves out, feeds the expansion."""
        t0 = time.perf_counter()
        config = self.config.prf
        original = self.sparse_query(query)
        scratch = SearchResponse(results=[], requested_mode="bm25", mode="bm25")
        top = self._documents("bm25", query, config.feedback_docs, flt, exclude, scratch, sparse=original)
        self._hydrate(top[: config.feedback_docs])
        feedback = [FeedbackDocument(d.document_id, d.score, d.child_text) for d in top[: config.feedback_docs]]
        expansion = rm3(self.bm25, original, feedback, config)
        response.seconds["feedback"] = time.perf_counter() - t0
        response.expansion = expansion
        return expansion

    def _bm25_hits(self, query: str, depth: int, flt: SearchFilter, sparse: SparseVector | None = None) -> list[Hit]:
        vector = sparse if sparse is not None else self.sparse_query(query)
        return _cut(self.store.search_sparse(vector, depth + TIE_MARGIN, flt, fields=GROUPING_FIELDS), depth)

    def _dense_hits(
        self,
        mode: str,
        query: str,
        depth: int,
        flt: SearchFilter,
        response: SearchResponse,
        sparse: SparseVector | None = None,
    ) -> list[Hit]:
        try:
            t0 = time.perf_counter()
            vector = self._query_vector(query)
            response.seconds["embed"] = response.seconds.get("embed", 0.0) + time.perf_counter() - t0
            if mode == "vector":
                return _cut(self.store.search_dense(vector, depth + TIE_MARGIN, flt, fields=GROUPING_FIELDS), depth)
            prefetch = max(self.config.prefetch_for(self._children), depth)
            title = split_query(query).title
            plan = self.config.plan_for(
                flt.sources, title_line=bool(title), title_vectors=TITLE_VECTOR in self.store.dense_vector_names()
            )
            extra = self._prefetches(plan, vector, title)
            keywords = sparse if sparse is not None else self.sparse_query(query)
            hybrid = self.store.search_hybrid(
                vector, keywords, depth + TIE_MARGIN, prefetch, flt, plan.fusion, extra, fields=GROUPING_FIELDS
            )
            return _cut(hybrid, depth)
        except Exception as exc:  # a dense failure must not take keyword search down with it
            message = f"{mode} search unavailable, fell back to bm25: {type(exc).__name__}: {exc}"
            log.warning(message)
            response.warnings.append(message)
            response.mode = "bm25"
            return self._bm25_hits(query, depth, flt, sparse)

    def _prefetches(self, plan: HybridPlan, vector: list[float], title: str) -> list[DensePrefetch]:
        """The plan's extra lists as dense prefetches (the title line embedded only when a list needs it)."""
        title_vector = self._query_vector(title) if title and plan.extra else None
        sources = {
            TITLE_LINE_ON_CHUNKS: (title_vector, DENSE_VECTOR),
            QUERY_ON_TITLES: (vector, TITLE_VECTOR),
            TITLE_LINE_ON_TITLES: (title_vector, TITLE_VECTOR),
        }
        out = []
        for name in plan.extra:
            searched, using = sources[name]
            if searched is None:
                raise ValueError(f"the hybrid list {name!r} needs a title line, and the query has none")
            out.append(DensePrefetch(searched, using))
        return out

    def _rerank(
        self,
        reranker: Reranker,
        query: str,
        docs: list[SearchResult],
        flt: SearchFilter,
        response: SearchResponse,
        exclude: Sequence[str] = (),
    ) -> list[SearchResult] | None:
        """``docs`` reordered by ``reranker``; None (and a warning) when the reranker fails, so the caller keeps the
        hybrid ranking: an LLM reranker whose model is down degrades a search, it does not fail it."""
        t0 = time.perf_counter()
        head, tail = docs[: self.config.rerank_depth], docs[self.config.rerank_depth :]
        self._hydrate(head)  # the features read titles, texts, dates and authors
        self.add_signals(query, head, flt, exclude)
        self._attach_parent_text(head)
        self._hide_masked(head, exclude)
        try:
            reranked = rerank(reranker, query, head)
        except Exception as exc:  # the model's client error, a timeout: named, never the query (scores are untouched)
            response.warnings.append(
                f"reranker {reranker.name} failed ({type(exc).__name__}): results are the hybrid ranking"
            )
            response.seconds["rerank"] = time.perf_counter() - t0
            return None
        # Documents past the rerank depth keep their hybrid order, below every reranked one.
        floor = min((r.score for r in reranked), default=0.0)
        for i, result in enumerate(tail):
            result.signals["before_rerank"] = result.score
            result.score = floor - 1.0 - i * 1e-6
        response.seconds["rerank"] = time.perf_counter() - t0
        return reranked + tail

    def rerank_candidates(
        self,
        query: str,
        principal: Principal,
        depth: int | None = None,
        exclude: Iterable[str] = (),
        sources: Iterable[str] | None = None,
    ) -> list[SearchResult]:
        """The hybrid documents a reranker would rescore, with signals and parent text (training data)."""
        depth = depth or self.config.rerank_depth
        exclude = tuple(exclude)
        response = self.search(query, "hybrid", principal, depth, sources=sources, exclude=exclude)
        self.add_signals(query, response.results, search_filter(principal, sources), exclude)
        self._hide_masked(response.results, exclude)
        return response.results

    def _hide_masked(self, candidates: list[SearchResult], exclude: Sequence[str]) -> None:
        """What a reranker reads when the search left child chunks out (a mined thread's question): every candidate's
        own child text, no title and no parent text. A thread's title and parent repeat its question, so the reranked
        arm would read the question back; blanking only that thread's would mark it as the answer. Every candidate
        alike, in training and in scoring, leaves nothing to tell them apart but what the search found."""
        if not candidates or not any(_is_point_id(e) for e in exclude):
            return
        for result in candidates:
            result.title = ""
            result.parent_text = result.child_text

    def add_signals(
        self, query: str, candidates: list[SearchResult], flt: SearchFilter, exclude: Sequence[str] = ()
    ) -> None:
        """Per-arm scores and ranks of each candidate document (rerank features).

        Dense and BM25 are re-run restricted to the candidates' documents, so every candidate gets its
        best child's exact cosine and BM25 score, not only the ones that made a prefetch list.
        """
        for rank, result in enumerate(candidates):
            result.signals.update(hybrid_score=result.score, hybrid_rank=float(rank))
        if not candidates:
            return
        shared = self._shared
        if shared is None:  # a served search or a non-hybrid list: nothing kept, no key built
            self._add_arm_signals(query, candidates, flt, exclude)
            return
        key = (query, tuple(r.document_id for r in candidates), repr(flt.acl), tuple(exclude))
        if key in shared.signals:
            kept, seconds = shared.signals[key]
            note_reused(seconds)
            for result, (signals, matching) in zip(candidates, kept, strict=True):
                result.signals.update(signals)
                result.matching_children = matching
            return
        started = time.perf_counter()
        self._add_arm_signals(query, candidates, flt, exclude)
        shared.signals[key] = (
            [
                ({k: v for k, v in r.signals.items() if k not in ("hybrid_score", "hybrid_rank")}, r.matching_children)
                for r in candidates
            ],
            time.perf_counter() - started,
        )

    def _add_arm_signals(
        self, query: str, candidates: list[SearchResult], flt: SearchFilter, exclude: Sequence[str] = ()
    ) -> None:
        scoped = SearchFilter(
            document_ids=tuple(r.document_id for r in candidates),
            acl=flt.acl,
        )
        # A fixed depth, so training candidates and scored candidates get comparable signals.
        limit, depth = self.config.signal_depth, self.config.signal_depth + TIE_MARGIN
        # Child chunks the search left out give no signal either (a mined thread's question).
        left_out = frozenset(exclude)

        def kept(hits: list[Hit]) -> list[Hit]:
            return [h for h in hits if h.id not in left_out] if left_out else hits

        def sparse_hits(vector: SparseVector) -> list[Hit]:
            return _cut(kept(self.store.search_sparse(vector, depth, scoped, fields=SIGNAL_FIELDS)), limit)

        def dense_hits(text: str) -> list[Hit]:
            try:
                return _cut(
                    kept(self.store.search_dense(self._query_vector(text), depth, scoped, fields=SIGNAL_FIELDS)),
                    limit,
                )
            except Exception:  # missing dense signals are zeros
                return []

        arms = {"bm25": sparse_hits(self.sparse_query(query)), "dense": dense_hits(query)}
        # The query's title line alone (a Jira summary), searched both ways: duplicates share summaries more
        # than they share descriptions. A query without a title line has no title signals (zeros, which a
        # model trained on one-line queries ignores as constant).
        title = split_query(query).title
        if title:
            arms["title_bm25"] = sparse_hits(self.bm25.encode_query(title))
            arms["title_dense"] = dense_hits(title)
        # Children sharing a query term, counted at the fixed depth (a rerank feature).
        matches: dict[str, int] = {}
        for hit in arms["bm25"]:
            matches[hit.payload["document_id"]] = matches.get(hit.payload["document_id"], 0) + 1
        for result in candidates:
            result.matching_children = matches.get(result.document_id, 0)
        for arm, hits in arms.items():
            by_doc = {doc_id: (rank, score) for rank, (doc_id, score) in enumerate(document_scores(hits))}
            for result in candidates:
                rank, score = by_doc.get(result.document_id, (len(candidates), 0.0))
                result.signals[f"{arm}_score"] = float(score)
                result.signals[f"{arm}_rank"] = float(rank)

    def _hydrate(self, results: list[SearchResult], fields: Sequence[str] | None = None) -> None:
        """Read the payload (or only ``fields`` of it) of the children that grouping-only searches left bare: one
        retrieve by id, for the results handed out only (reading payloads in a deep search was most of its time)."""
        bare = [r for r in results if not r.hydrated]
        if not bare:
            return
        ids = [r.child_id for r in bare]
        payloads = {h.id: h.payload for h in self.store.retrieve(self.store.names.children, ids, fields)}
        for result in bare:
            read_payload(result, payloads.get(result.child_id, {}), fields)

    def _attach_parent_text(self, results: list[SearchResult]) -> None:
        missing = list({r.parent_id for r in results if not r.parent_text})
        if not missing:
            return
        known = self._shared.parent_texts if self._shared is not None else {}
        fetch = [p for p in missing if p not in known]
        parents = {h.id: h.payload.get("text", "") for h in self.store.retrieve(self.store.names.parents, fetch)}
        parents.update({p: known[p] for p in missing if p in known})
        if self._shared is not None:
            known.update(parents)
        for result in results:
            if not result.parent_text:
                result.parent_text = parents.get(result.parent_id, result.child_text)


def _is_point_id(value: str) -> bool:
    """Whether an ``exclude`` entry names a child chunk (a point's UUID) rather than a document."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


@dataclass
class SharedWork:
    """What :meth:`Retriever.shared_work` keeps: documents by search, arm signals by candidate list, parent texts."""

    # Each with the seconds it took to compute (a search that reuses it still counts them: reuse_ledger).
    documents: dict[tuple[Any, ...], tuple[list[SearchResult], float]] = field(default_factory=dict)
    signals: dict[tuple[Any, ...], tuple[list[tuple[dict[str, float], int]], float]] = field(default_factory=dict)
    parent_texts: dict[str, str] = field(default_factory=dict)


def _copies(results: list[SearchResult]) -> list[SearchResult]:
    """Results a caller may change (score, signals, parent text) without changing the kept ones: a shallow copy of
    each with its own signals and authors, made without ``__init__`` (``dataclasses.replace`` took 4× as long, seconds
    an evaluation)."""
    out = []
    for result in results:
        copied = object.__new__(SearchResult)
        copied.__dict__.update(result.__dict__)
        copied.signals, copied.authors = dict(result.signals), list(result.authors)
        out.append(copied)
    return out


def search_filter(
    principal: Principal,
    sources: Iterable[str] | None = None,
    containers: Iterable[str] | None = None,
    updated_from: str | None = None,
    updated_to: str | None = None,
    authors: Iterable[str] | None = None,
) -> SearchFilter:
    """The index filter for a search: scope plus the principal's ACL. Without a source named, tool definitions
    are left out: they answer tool search (retrieval/tool_search.py), not a question about documents."""
    return SearchFilter(
        sources=tuple(sources) if sources else None,
        excluded_sources=None if sources else (tool_sources() or None),
        containers=tuple(containers) if containers else None,
        authors=tuple(authors) if authors else None,
        acl=principal.acl_condition(),
        updated_from=updated_from,
        updated_to=updated_to,
    )
