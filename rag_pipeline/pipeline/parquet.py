"""How a partition's parquet file is written (the IO manager's weekly files, the upgrade's converted ones), and
which of the temporary files that writing leaves retention may delete."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rag_pipeline.pipeline.retained import TEMPORARY_FILES, TEMPORARY_LABEL, Expired, RetentionScope, children


def write_frame(path: Path, frame: pd.DataFrame) -> None:
    """``frame`` as ``frame.to_parquet(path, index=False)`` stores it, without column statistics or dictionary
    pages (a partition's file is read whole, never filtered, and for rows of long text both only cost), written
    under a temp name of its own and renamed: readers never see half a file, and two processes writing the same
    path never rename each other's file."""
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex}.tmp")
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(table, tmp, use_dictionary=False, write_statistics=False)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


class ParquetWrites:
    """Retention of the temporary files :func:`write_frame` leaves when killed half-way
    (:class:`~rag_pipeline.pipeline.retained.RetainedArtifact`): ``.<name>.<hex>.tmp`` under an asset's folder,
    older than a day (a younger one may be a write in progress)."""

    kind = TEMPORARY_FILES
    label = TEMPORARY_LABEL

    def expired(self, scope: RetentionScope) -> Iterator[Expired]:
        for asset_dir in children(scope.settings.paths.parquet):
            if asset_dir.is_dir() and not asset_dir.is_symlink():
                for temp in sorted(asset_dir.rglob(".*.tmp")):
                    mtime = temp.lstat().st_mtime
                    if temp.is_file() and mtime < scope.temporary_cutoff:
                        yield Expired(temp, "a parquet write that never finished", mtime)
