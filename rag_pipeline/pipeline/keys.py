"""The names a source's chain is known by: its assets, its weeks' partition keys, its raw asset's run config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from rag_pipeline.scheduling.coverage import week_start


class _StageAsset:
    """A chain asset's name, the source's and the stage's joined (``slack`` + ``parent_chunks``): every chain names
    its assets alike, which the Dagster asset keys, the run records and the UI's lineage all rely on."""

    def __init__(self, stage: str) -> None:
        self.stage = stage

    def __get__(self, keys: ChainKeys | None, owner: type | None = None) -> str:
        if keys is None:
            raise AttributeError(f"{self.stage} is the name of one source's asset: ask a ChainKeys")
        return f"{keys.source}_{self.stage}"


@dataclass(frozen=True)
class ChainKeys:
    """The asset names of one source's chain, from its raw documents asset to its Qdrant points."""

    source: str
    raw: str

    parents = _StageAsset("parent_chunks")
    children = _StageAsset("child_chunks")
    dense = _StageAsset("dense_vectors")
    sparse = _StageAsset("sparse_vectors")
    points = _StageAsset("qdrant_points")

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
