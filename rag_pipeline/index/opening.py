"""Open the index wherever it lives: the one place that turns a location into a :class:`VectorStore`.

The Dagster resource (``defs/resources.py``), the command line and the search service all open the index
through :func:`open_vector_store`, so an engine, a shard count or an HNSW parameter cannot differ between
what the pipeline writes and what a reader searches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames, DenseSearch, VectorStore


@dataclass(frozen=True)
class StoreLocation:
    """Where the index is and how collections are made: the embedded folder, or a Qdrant server at ``url``.

    ``api_key`` is the resolved secret (never logged; the dataclass hides it from its repr)."""

    path: Path
    url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    names: CollectionNames = field(default_factory=CollectionNames)
    shard_number: int | None = None
    replication_factor: int | None = None
    dense_search: DenseSearch = field(default_factory=DenseSearch)
    wait_seconds: float = 0.0

    @property
    def embedded(self) -> bool:
        """Whether this is the embedded engine's folder (one opener at a time) rather than a server."""
        return not self.url

    @property
    def engine(self) -> str:
        return "qdrant-edge" if self.embedded else "qdrant-client:server"


def open_vector_store(
    location: StoreLocation,
    *,
    on_wait: Callable[[str], None] | None = None,
    label: str | None = None,
    yields: bool = False,
    wait_seconds: float | None = None,
) -> VectorStore:
    """The store at ``location``; the caller closes it. The embedded folder waits for another opener up to
    ``wait_seconds`` (default: the location's), reporting on ``on_wait``; ``yields`` marks an opener that
    hands the folder to waiting ones (the search service). A server has no such lock."""
    if location.url:
        # qdrant-client (~1.2 s to import) only where a server is used, not by every command at start-up.
        from rag_pipeline.index.client_store import ClientVectorStore

        return ClientVectorStore.connect(
            url=location.url,
            api_key=location.api_key,
            names=location.names,
            shard_number=location.shard_number,
            replication_factor=location.replication_factor,
            dense_search=location.dense_search,
        )
    return EdgeVectorStore(
        location.path,
        location.names,
        wait_seconds=location.wait_seconds if wait_seconds is None else wait_seconds,
        on_wait=on_wait,
        label=label,
        dense_search=location.dense_search,
        yields=yields,
    )
