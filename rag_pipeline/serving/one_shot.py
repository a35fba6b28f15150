"""The use cases on an index opened for each call: what the CLI's ``search``, ``ask`` and ``tree`` run when no
service holds the index.

The embedded index admits one process at a time (docs/notes/embedded_store_concurrency.md), so a command opens it
for the call alone, after everything slow (loading the models, embedding the query) is done, and lets it go at
once. The search, document and tree use cases are the service's own (:mod:`~rag_pipeline.serving.search`,
:mod:`~rag_pipeline.serving.documents`, :func:`~rag_pipeline.retrieval.tree.reader_tree`); only the index's
lifetime differs. Built from settings in the composition root (:func:`rag_pipeline.composition.one_shot_index`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AbstractContextManager

from rag_pipeline.index.store import IndexedAcl, VectorStore
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import RetrieverConfig
from rag_pipeline.retrieval.rewrite import PlanOutcome
from rag_pipeline.retrieval.tool_outcomes import ToolOutcomes
from rag_pipeline.retrieval.tool_search import ToolRoster, ToolSearch, ToolSearchResponse, read_catalog
from rag_pipeline.retrieval.tree import ContainerNode, reader_tree
from rag_pipeline.retrieval.tree_view import TreePage, TreeView, listing_and_view
from rag_pipeline.serving.documents import ServedDocument, document_parents, indexed_acl, served_document
from rag_pipeline.serving.schemas import SearchRequest, ToolSearchRequest
from rag_pipeline.serving.search import ServedSearch, nothing_under_path, search_index, within_path

OpenStore = Callable[[], AbstractContextManager[VectorStore]]


class OneShotIndex:
    """Searches, document reads and tree listings, each on the index opened for that call by ``open_store``, with
    ``models`` loaded once (before any opening) and the searches' ``config`` and ``default_min_score``."""

    def __init__(
        self, open_store: OpenStore, models: SearchModels, config: RetrieverConfig, *, default_min_score: float = 0.0
    ) -> None:
        self.open_store = open_store
        self.models = models
        self.config = config
        self.default_min_score = default_min_score

    def search(self, request: SearchRequest, reader: Principal, plan: PlanOutcome | None = None) -> ServedSearch:
        """``request`` as ``reader``; a path is resolved in the reader's own tree within the same opening."""
        with self.open_store() as store:
            if request.path is not None:
                narrowed = within_path(request, reader_tree(store, reader, request.path))
                if narrowed is None:
                    return nothing_under_path(request)
                request = narrowed
            retriever = build_retriever(store, self.models, self.config)
            return search_index(retriever, request, reader, default_min_score=self.default_min_score, plan=plan)

    def get_document(self, document_id: str, reader: Principal) -> ServedDocument | None:
        """The document if it exists and ``reader`` may read it; None otherwise (not told apart)."""
        with self.open_store() as store:
            return served_document(document_id, document_parents(store, document_id), reader)

    def document_acl(self, document_id: str) -> IndexedAcl | None:
        """The document's indexed ACL, None when it is not indexed (``explain``)."""
        with self.open_store() as store:
            return indexed_acl(store, document_id)

    def search_tools(
        self,
        tool_search: ToolSearch,
        request: ToolSearchRequest,
        reader: Principal,
        outcomes: ToolOutcomes,
        exclude: Collection[str] = (),
    ) -> ToolSearchResponse:
        """The tools for a task, as the service's ``search_tools`` finds them (usage and success from
        ``outcomes``), none named in ``exclude``."""
        with self.open_store() as store:
            retriever = build_retriever(store, self.models, self.config)
            return tool_search.search(
                retriever,
                reader,
                request.query,
                outcomes.stats(),
                mode=request.mode,
                top_k=request.top_k,
                categories=request.categories or (),
                min_similarity=request.min_similarity,
                exclude=exclude,
            )

    def tool_roster(self, tool_search: ToolSearch) -> ToolRoster:
        """The indexed tools' names and the critical set."""
        with self.open_store() as store:
            return tool_search.roster(read_catalog(store))

    def tool_names(self) -> set[str]:
        """The names of the indexed tools."""
        with self.open_store() as store:
            return {entry.name for entry in read_catalog(store).values()}

    def tree(self, reader: Principal, prefix: str | None = None) -> list[ContainerNode]:
        """The sources and containers ``reader`` may read a document in, under ``prefix``."""
        with self.open_store() as store:
            return reader_tree(store, reader, prefix)

    def tree_view(self, reader: Principal, prefix: str | None, view: TreeView) -> tuple[list[ContainerNode], TreePage]:
        """The containers under ``prefix`` and the page of the deeper tree ``view`` asks for, in one opening."""
        with self.open_store() as store:
            return listing_and_view(store, reader, prefix, view)
