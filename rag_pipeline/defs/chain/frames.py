"""Joining and splitting per-partition frames, so one step can process a whole partition range.

Every stored frame carries two bookkeeping columns, the day and the container of its document
(:mod:`rag_pipeline.scheduling.coverage`), so a run that covers only some containers of a week rewrites
only their rows of that week's file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from rag_pipeline.scheduling.coverage import CONTAINER_COLUMN, DAY_COLUMN, Coverage

PARTITION_COLUMN = "_partition"
BOOKKEEPING = (DAY_COLUMN, CONTAINER_COLUMN)


class CoveredFrames(dict[str, pd.DataFrame]):
    """``{partition_key: frame}`` written by a run with a coverage: the IO manager replaces the covered cells
    of each partition's file with these rows and keeps the others."""

    def __init__(self, frames: Mapping[str, pd.DataFrame], coverage: Coverage) -> None:
        super().__init__(frames)
        self.coverage = coverage


def concat_partitions(frames: Mapping[str, pd.DataFrame], columns: Iterable[str] | None = None) -> pd.DataFrame:
    """One frame with a partition column, from ``{partition_key: frame}``."""
    parts = [(str(k), f) for k, f in frames.items() if len(f)]
    if not parts:
        cols = [*(columns or next(iter(frames.values()), pd.DataFrame()).columns), *BOOKKEEPING, PARTITION_COLUMN]
        return pd.DataFrame(columns=list(dict.fromkeys(cols)))
    # One concat, then the keys repeated once per row: six times faster than a copy of each frame with its key.
    whole = pd.concat([f for _, f in parts], ignore_index=True)
    whole[PARTITION_COLUMN] = np.repeat(np.array([k for k, _ in parts], dtype=object), [len(f) for _, f in parts])
    return whole


def covered_rows(frame: pd.DataFrame, coverage: Coverage) -> pd.DataFrame:
    """The rows of the run's cells: what a step processes (other containers' rows of the same weeks were
    processed by the runs that wrote them)."""
    if coverage.whole or not len(frame):
        return frame
    return frame[coverage.mask(frame)].reset_index(drop=True)


def split_partitions(frame: pd.DataFrame, keys: Iterable[str], columns: Iterable[str]) -> dict[str, pd.DataFrame]:
    """Inverse of :func:`concat_partitions`: every key gets a frame (with the bookkeeping columns), empty when
    it has no rows. The keys without rows share one empty frame: frames are never mutated downstream."""
    cols = list(dict.fromkeys([*columns, *BOOKKEEPING]))
    groups = {str(k): g for k, g in frame.groupby(PARTITION_COLUMN, sort=False)} if len(frame) else {}
    empty = pd.DataFrame(columns=cols)
    return {str(k): (groups[str(k)][cols].reset_index(drop=True) if str(k) in groups else empty) for k in keys}


def label_like_documents(frame: pd.DataFrame, documents: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (rows with a ``document_id``) with the partition, day and container of their document."""
    if not len(frame):
        for column in (PARTITION_COLUMN, *BOOKKEEPING):
            frame[column] = pd.Series(dtype=object)
        return frame
    by_id = documents.drop_duplicates("document_id").set_index("document_id")
    for column in (PARTITION_COLUMN, *BOOKKEEPING):
        frame[column] = frame["document_id"].map(by_id[column]).to_numpy()
    return frame
