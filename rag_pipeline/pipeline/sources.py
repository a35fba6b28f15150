"""A source as the runners read it: its name, the tag its sync runs carry, its chain's asset names and the name of
its registered containers. ``defs.chain.source_spec.SourceSpec`` (the Dagster side, with the assets and resources)
has these, so the runners' queries take any spec without importing the Dagster wiring."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from rag_pipeline.pipeline.keys import ChainKeys
from rag_pipeline.sources.registry import tool_sources


class SourceNames(Protocol):
    """What the runners' queries of the instance read of a source."""

    @property
    def name(self) -> str: ...

    @property
    def api_tag(self) -> str:
        """The ``rag/source`` tag value of its sync runs."""
        ...

    @property
    def keys(self) -> ChainKeys: ...

    @property
    def containers_name(self) -> str:
        """The dynamic partitions its channels or projects are registered as."""
        ...


def document_sources(specs: Mapping[str, object]) -> list[str]:
    """The document sources among ``specs`` (by name): those mined for eval sets and scored by the document
    evaluations (a tool catalog has its own evaluation, tool_search_eval)."""
    tools = set(tool_sources())
    return [name for name in specs if name not in tools]


def document_points(specs: Mapping[str, SourceNames]) -> list[str]:
    """The Qdrant points assets of the document sources: what the document evaluations read."""
    return [specs[name].keys.points for name in document_sources(specs)]
