"""The names a source's chain is known by: its assets, its weeks' partition keys, its raw asset's run config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from rag_pipeline.scheduling.coverage import week_start


@dataclass(frozen=True)
class ChainKeys:
    """The asset names of one source's chain, from its raw documents asset to its Qdrant points."""

    source: str
    raw: str

    @property
    def parents(self) -> str:
        return f"{self.source}_parent_chunks"

    @property
    def children(self) -> str:
        return f"{self.source}_child_chunks"

    @property
    def dense(self) -> str:
        return f"{self.source}_dense_vectors"

    @property
    def sparse(self) -> str:
        return f"{self.source}_sparse_vectors"

    @property
    def points(self) -> str:
        return f"{self.source}_qdrant_points"

    @property
    def all(self) -> list[str]:
        """Every asset of the chain, raw documents first."""
        return [self.raw, self.parents, self.children, self.dense, self.sparse, self.points]


def week_key(day: str | date) -> str:
    """The partition key of the week holding ``day``."""
    return week_start(date.fromisoformat(day) if isinstance(day, str) else day).isoformat()


def raw_config(run_config: Mapping[str, Any] | None, raw_asset: str) -> dict[str, Any]:
    """The raw asset's config in a run's config (empty where it has none)."""
    ops: dict[str, Any] = dict((run_config or {}).get("ops") or {})
    return dict((ops.get(raw_asset) or {}).get("config") or {})
