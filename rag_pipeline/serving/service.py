"""The search service's logic, free of HTTP and MCP: models loaded once, the index shared between queries and
handed to writers, searches and document reads as a reader. The HTTP API (``rag_pipeline/http/``) and the MCP tools
are thin layers over :class:`SearchService`; its searches and document reads are the use cases of
:mod:`~rag_pipeline.serving.search` and :mod:`~rag_pipeline.serving.documents`, which the CLI runs on an index
opened for one command (:mod:`~rag_pipeline.serving.one_shot`).
"""

from __future__ import annotations

import copy
import logging
import os
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from rag_pipeline.index.index_info import written_at
from rag_pipeline.index.opening import StoreLocation, open_vector_store
from rag_pipeline.index.store import IndexedAcl, VectorStore
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.retrieval.rewrite import PlanOutcome
from rag_pipeline.retrieval.tool_outcomes import ToolOutcomes
from rag_pipeline.retrieval.tool_search import (
    ToolRoster,
    ToolSearch,
    ToolSearchConfig,
    ToolSearchResponse,
    outcome_record,
)
from rag_pipeline.retrieval.tree import ContainerNode, reader_tree
from rag_pipeline.retrieval.tree_view import TreePage, TreeView, listing_and_view
from rag_pipeline.serving.active_tools import ActiveToolSets
from rag_pipeline.serving.documents import ServedDocument, document_parents, indexed_acl, served_document
from rag_pipeline.serving.feedback import FeedbackDisabled, FeedbackStore
from rag_pipeline.serving.request_audit import RequestAudit
from rag_pipeline.serving.result_cache import ResultCache, access_key
from rag_pipeline.serving.schemas import FeedbackRequest, SearchRequest, ToolOutcomeRequest, ToolSearchRequest
from rag_pipeline.serving.search import ServedSearch, nothing_under_path, search_index, within_path
from rag_pipeline.serving.shared_cache import (
    SharedGeneration,
    SharedRedis,
    SharedResultCache,
    document_codec,
    search_codec,
)
from rag_pipeline.serving.shared_index import IndexUnavailable, SharedIndex
from rag_pipeline.serving.tracing import Tracing

log = logging.getLogger(__name__)

SERVICE_LABEL = "rag-pipeline serve (search service; hands the index to writers)"
# How stale the index's last-write time may be in the metrics (a scrape reads it again after this long).
WRITTEN_REREAD_SECONDS = 30.0


class SearchService:
    """Searches the pipeline's index as callers, with the models loaded once and the index shared.

    ``wait_seconds`` bounds how long a query waits for the index while a writer holds it (then the query is
    told why, as :class:`IndexUnavailable`)."""

    def __init__(
        self,
        location: StoreLocation,
        models: SearchModels,
        config: RetrieverConfig,
        *,
        wait_seconds: float,
        label: str = SERVICE_LABEL,
        poll_seconds: float = 0.05,
        max_concurrent_queries: int | None = None,
        audit: RequestAudit | None = None,
        cache_entries: int = 0,
        cache_seconds: float = 300.0,
        tracing: Tracing | None = None,
        default_min_score: float = 0.0,
        tool_search: ToolSearch | None = None,
        tool_outcomes: ToolOutcomes | None = None,
        feedback: FeedbackStore | None = None,
        shared_cache: SharedRedis | None = None,
        active_tools: ActiveToolSets | None = None,
    ) -> None:
        self.default_min_score = default_min_score
        self.feedback = feedback  # readers' judgements (opt-in: RAG_FEEDBACK_DAYS)
        # Tool search over the index's tool catalog; outcomes in memory unless the settings give the data folder's.
        self.tool_search = tool_search or ToolSearch(ToolSearchConfig(), ResultCache(cache_entries, cache_seconds))
        self.tool_outcomes = tool_outcomes or ToolOutcomes()
        # Each caller's active tool set (serving/active_tools.py), in memory: bounded and expiring.
        self.active_tools = ActiveToolSets() if active_tools is None else active_tools
        self.location = location
        self.tracing = tracing or Tracing(None)  # spans for searches from every face (HTTP, chat, MCP)
        # Recent searches and documents (serving/result_cache.py); every key starts with the index generation. With
        # ``shared_cache`` (RAG_CACHE_REDIS_URL) both are in Redis, shared by every replica, and so is the
        # generation (serving/shared_cache.py).
        self.search_cache: ResultCache[ServedSearch] | SharedResultCache[ServedSearch]
        self.document_cache: ResultCache[list[Any]] | SharedResultCache[list[Any]]
        self._shared_generation = SharedGeneration(shared_cache) if shared_cache is not None else None
        if shared_cache is not None:
            self.search_cache = SharedResultCache(shared_cache, "search", cache_entries, cache_seconds, search_codec())
            self.document_cache = SharedResultCache(
                shared_cache, "document", cache_entries, cache_seconds, document_codec()
            )
        else:
            self.search_cache = ResultCache(cache_entries, cache_seconds)
            self.document_cache = ResultCache(cache_entries, cache_seconds)
        self._generation = 0
        self.audit = audit  # the optional per-request log of documents given (never query text)
        self.models = models
        self.config = config
        self.wait_seconds = wait_seconds
        # As many queries run at once as there are cores; the others queue here, outside the index. More would
        # only share the cores (each query slower), and a writer waiting for the index waits for the queries
        # in flight: few, quick ones hand it over sooner.
        self._slots = threading.BoundedSemaphore(max_concurrent_queries or max(2, os.cpu_count() or 2))
        self._index_written: str | None = None
        self._written_read_at = 0.0
        self._documents: int | None = None
        folder = location.path if location.embedded else None
        self.index = SharedIndex[Retriever](
            lambda: open_vector_store(location, wait_seconds=0, label=label, yields=True),
            self._prepare,
            folder,
            ready=self._ready,
            poll_seconds=poll_seconds,
        )

    # --- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        self.index.start()

    def close(self) -> None:
        self.index.close()

    def _ready(self) -> str | None:
        if self.location.embedded and not (self.location.path / self.location.names.children).exists():
            return f"no index at {self.location.path} yet: run `rag-pipeline demo` or `rag-pipeline index` first"
        return None

    def _prepare(self, store: VectorStore) -> Retriever:
        retriever = build_retriever(store, self.models, self.config)
        self._index_changed()  # (re)opened after a writer had the index: nothing cached before is current
        self._index_written = written_at(store)
        self._written_read_at = time.monotonic()
        self._documents = None  # counted again by the next health check
        return retriever

    def index_written(self) -> str | None:
        """When the pipeline last wrote documents to the index. Read when the index is (re)opened, and again at
        most every :data:`WRITTEN_REREAD_SECONDS` seconds: a Qdrant server is never reopened, so writes to it would
        otherwise never show."""
        if time.monotonic() - self._written_read_at >= WRITTEN_REREAD_SECONDS and self.index.state()[0] == "open":
            try:
                with self.index.reading(timeout=1.0) as (retriever, _waited):
                    written = written_at(retriever.store)
                    if written != self._index_written:  # a write to a Qdrant server (never reopened)
                        self._index_changed()
                    self._index_written = written
                    self._written_read_at = time.monotonic()
            except Exception:  # lent to a writer, a server not answering: the last value stands
                pass
        return self._index_written

    def _index_changed(self) -> None:
        """A new generation: every cached search and document before it is unreachable, on every replica when the
        caches are shared. The first opening is not a change (a new replica has cached nothing, and a write it
        would be the first to see is seen by the running ones within WRITTEN_REREAD_SECONDS)."""
        self._generation += 1
        if self._shared_generation is not None and self._generation > 1:
            self._shared_generation.advance()

    def _cache_generation(self) -> object | None:
        """What a cache key starts with: this process's generation, or the replicas' shared one (None while Redis
        does not answer: then nothing is served from the cache or put in it)."""
        if self._shared_generation is None:
            return self._generation
        shared = self._shared_generation.current()
        return None if shared is None else ("shared", shared)

    # --- health --------------------------------------------------------------------------------------
    def health(self) -> tuple[bool, dict[str, Any]]:
        """(ready, body): ready while queries can be answered — the index open, or lent to a writer and coming
        back (queries wait meanwhile) — and not when there is no usable index (none yet, another model)."""
        state, reason = self.index.state()
        body: dict[str, Any] = {
            "status": "ok" if state in ("open", "waiting") else "unavailable",
            "index": {"open": "open", "waiting": "lent to a writer"}.get(state, state),
            "engine": self.location.engine,
            "dense_model": self.models.dense_model,
            "reranker": self.models.reranker.name if self.models.reranker is not None else None,
        }
        if state not in ("open", "waiting"):
            body["reason"] = reason
            return False, body
        if state == "open" and self._documents is None:
            try:
                with self.index.reading(timeout=1.0) as (retriever, _waited):
                    # Documents, not chunks: a long thread or issue has several parents.
                    self._documents = len(retriever.store.indexed_documents())
            except IndexUnavailable:
                pass  # lent to a writer meanwhile: the last count (or none) until it is back
            except Exception as exc:  # a Qdrant server that stopped answering
                body.update(status="unavailable", reason=f"the index did not answer: {type(exc).__name__}")
                return False, body
        body["documents"] = self._documents
        body["index_updated"] = self._index_written
        body["index_opened"] = _iso(self.index.stats.opened_at)
        return True, body

    # --- queries -------------------------------------------------------------------------------------
    @contextmanager
    def _turn(self) -> Iterator[tuple[Retriever, float]]:
        """A query's turn: a free slot, then the index; both within ``wait_seconds`` in all. Yields the
        retriever and the seconds waited for them."""
        queued = time.monotonic()
        if not self._slots.acquire(timeout=self.wait_seconds):
            raise IndexUnavailable(f"every query slot stayed busy for {self.wait_seconds:g} s")
        try:
            remaining = max(0.0, self.wait_seconds - (time.monotonic() - queued))
            with self.index.reading(remaining) as (retriever, _):
                yield retriever, time.monotonic() - queued
        finally:
            self._slots.release()

    def search(self, request: SearchRequest, reader: Principal, plan: PlanOutcome | None = None) -> ServedSearch:
        """Search as ``reader`` (never the all-documents reader: that one is the evaluation's alone), following a
        rewrite ``plan`` when one is given (its LLM call is made before: no query slot is held for it); traced as a
        ``search`` span with its stages."""
        with self.tracing.stage("search", mode=request.mode, top_k=request.top_k) as span:
            started = time.time_ns()
            served = self._search(request, reader, plan)
            self.tracing.search_stages(served.timing_ms, started)
            span.set_attribute("served_mode", served.response.mode)
            span.set_attribute("results", len(served.response.results))
            span.set_attribute("cached", served.cached)
        return served

    def _search(self, request: SearchRequest, reader: Principal, plan: PlanOutcome | None) -> ServedSearch:
        if reader.all_documents:
            raise ValueError("the search service never searches without access control")
        # Keyed on the request as given: a path resolves the same for the same reader access and index generation,
        # so a hit skips the tree's scan too.
        key = self._cache_key(reader, request) if plan is None else None
        if key is not None and (hit := self.search_cache.get(key)) is not None:
            if self.audit is not None:
                self.audit.record(reader.all_user_ids(), "search", [r.document_id for r in hit.response.results])
            return replace(hit, response=copy.deepcopy(hit.response), waited_seconds=0.0, cached=True,
                           timing_ms={"wait": 0.0, "total": 0.0})  # fmt: skip
        if request.path is not None:
            # A path is the reader's own tree's: its containers, never one they could not see listed.
            narrowed = within_path(request, self.tree(reader, request.path))
            if narrowed is None:
                return nothing_under_path(request)
            request = narrowed
        with self._turn() as (retriever, waited):
            served = search_index(
                retriever, request, reader, default_min_score=self.default_min_score, plan=plan, waited=waited
            )
        response = served.response
        if self.audit is not None:
            self.audit.record(reader.all_user_ids(), "search", [r.document_id for r in response.results])
        if key is not None and response.mode == response.requested_mode:  # a degraded search is not kept
            self.search_cache.put(key, replace(served, response=copy.deepcopy(response)))
        return served

    def _cache_key(self, reader: Principal, request: SearchRequest) -> tuple[object, ...] | None:
        """The result cache's key for this search, or None when nothing may be served from the cache: the cache
        is off, or the index is not open (a writer has it, so the current state is about to change)."""
        if not self.search_cache.enabled or self.index.state()[0] != "open":
            return None
        self.index_written()  # a Qdrant server's last write, read again at most every 30 s
        generation = self._cache_generation()
        if generation is None:
            return None
        parameters = request.model_dump_json(exclude={"answer", "rewrite"})
        # A new calibration changes every result's relevance (and what min_score keeps): other entries.
        calibration = self.models.calibration.version if self.models.calibration is not None else None
        return (generation, calibration, access_key(reader), parameters)

    def tree(self, reader: Principal, prefix: str | None = None) -> list[ContainerNode]:
        """The sources and containers ``reader`` may read a document in, under ``prefix`` (retrieval/tree.py)."""
        if reader.all_documents:
            raise ValueError("the search service never lists without access control")
        with self._turn() as (retriever, _waited):
            return reader_tree(retriever.store, reader, prefix)

    def tree_view(self, reader: Principal, prefix: str | None, view: TreeView) -> tuple[list[ContainerNode], TreePage]:
        """The containers under ``prefix`` (the old listing) and the page of the deeper tree ``view`` asks for, in
        one turn on the index (retrieval/tree_view.py)."""
        if reader.all_documents:
            raise ValueError("the search service never lists without access control")
        with self._turn() as (retriever, _waited):
            return listing_and_view(retriever.store, reader, prefix, view)

    def search_tools(
        self, request: ToolSearchRequest, reader: Principal, exclude: Collection[str] = ()
    ) -> ToolSearchResponse:
        """The tools for a task (retrieval/tool_search.py), as ``reader``, none named in ``exclude``; the catalog and
        the query's candidates are cached per index generation, usage and success read fresh on every call."""
        if reader.all_documents:
            raise ValueError("the search service never searches without access control")
        self.index_written()
        with self._turn() as (retriever, _waited):
            return self.tool_search.search(
                retriever,
                reader,
                request.query,
                self.tool_outcomes.stats(),
                mode=request.mode,
                top_k=request.top_k,
                generation=self._generation,
                categories=request.categories or (),
                min_similarity=request.min_similarity,
                exclude=exclude,
            )

    def tool_roster(self) -> ToolRoster:
        """The indexed tools' names and the critical set (what an active set starts from)."""
        self.index_written()
        with self._turn() as (retriever, _waited):
            catalog = self.tool_search.catalog(retriever.store, self._generation)
        return self.tool_search.roster(catalog)

    def record_tool_outcome(self, name: str, request: ToolOutcomeRequest) -> dict[str, Any]:
        """Count a call of the indexed tool ``name``; KeyError when no indexed tool has that name."""
        with self._turn() as (retriever, _waited):
            catalog = self.tool_search.catalog(retriever.store, self._generation)
        if not any(entry.name == name for entry in catalog.values()):
            raise KeyError(name)
        return outcome_record(name, self.tool_outcomes.record(name, request.success, request.calls))

    def document_acl(self, document_id: str) -> IndexedAcl | None:
        """The document's indexed ACL (what searches filter on), None when it is not indexed. For ``explain``,
        which decides itself what the caller may be told."""
        with self._turn() as (retriever, _waited):
            return indexed_acl(retriever.store, document_id)

    def get_document(self, document_id: str, reader: Principal) -> ServedDocument | None:
        """The document if it exists and ``reader`` may read it; None otherwise (the two are not told apart, so
        a caller cannot probe for documents it may not see)."""
        if reader.all_documents:
            raise ValueError("the search service never reads without access control")
        generation: object | None = None
        if self.document_cache.enabled and self.index.state()[0] == "open":
            self.index_written()  # a Qdrant server's last write (an ACL change too), read again at most every 30 s
            generation = self._cache_generation()
        key = (generation, document_id)
        parents = self.document_cache.get(key) if generation is not None else None
        if parents is None:
            with self._turn() as (retriever, _waited):
                parents = document_parents(retriever.store, document_id)
            if generation is not None and parents:
                self.document_cache.put(key, parents)
        # The reader's access is checked on a hit as on a miss: the cache holds the parts and their ACLs.
        found = served_document(document_id, parents, reader)
        if found is not None and self.audit is not None:
            self.audit.record(reader.all_user_ids(), "document", [document_id])
        return found

    def record_feedback(self, request: FeedbackRequest, reader: Principal) -> dict[str, Any] | None:
        """Keep ``reader``'s judgement of a document; None when the document does not exist or ``reader`` may not
        read it (told apart from neither, as :meth:`get_document`), :class:`FeedbackDisabled` when feedback is off.
        A judgement never widens what anyone may see: it is stored, and only becomes an eval-set line run as its
        reader."""
        if self.feedback is None:
            raise FeedbackDisabled("readers' feedback is off (set RAG_FEEDBACK_DAYS to keep it)")
        if self.get_document(request.document_id, reader) is None:
            return None
        entry = self.feedback.record(reader.all_user_ids(), request.query, request.document_id, request.grade)
        return {"recorded": True, "document_id": entry["document"], "grade": entry["grade"], "at": entry["at"]}


def _iso(instant: float | None) -> str | None:
    return None if instant is None else datetime.fromtimestamp(instant, UTC).isoformat(timespec="seconds")
