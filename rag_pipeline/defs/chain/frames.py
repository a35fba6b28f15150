"""Joining and splitting per-partition frames, so one step can process a whole partition range."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

PARTITION_COLUMN = "_partition"


def concat_partitions(frames: Mapping[str, pd.DataFrame], columns: Iterable[str] | None = None) -> pd.DataFrame:
    """One frame with a partition column, from ``{partition_key: frame}``."""
    parts = [(str(k), f) for k, f in frames.items() if len(f)]
    if not parts:
        cols = [*(columns or next(iter(frames.values()), pd.DataFrame()).columns), PARTITION_COLUMN]
        return pd.DataFrame(columns=cols)
    # One concat, then the keys repeated once per row: six times faster than a copy of each frame with its key.
    whole = pd.concat([f for _, f in parts], ignore_index=True)
    whole[PARTITION_COLUMN] = np.repeat(np.array([k for k, _ in parts], dtype=object), [len(f) for _, f in parts])
    return whole


def split_partitions(frame: pd.DataFrame, keys: Iterable[str], columns: Iterable[str]) -> dict[str, pd.DataFrame]:
    """Inverse of :func:`concat_partitions`: every key gets a frame, empty when it has no rows.

    The keys without rows share one empty frame: most partitions of a backfill are empty days, and building
    an empty frame each cost ~0.6 ms (43 s of the demo's first index). Frames are never mutated downstream."""
    cols = list(columns)
    groups = {str(k): g for k, g in frame.groupby(PARTITION_COLUMN, sort=False)} if len(frame) else {}
    empty = pd.DataFrame(columns=cols)
    return {str(k): (groups[str(k)][cols].reset_index(drop=True) if str(k) in groups else empty) for k in keys}


def partition_of_document(documents: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """document_id -> partition key, from the raw documents of each partition."""
    return {doc_id: str(key) for key, frame in documents.items() for doc_id in frame["document_id"]}
