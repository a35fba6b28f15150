"""One parquet file per asset partition; partition ranges (single-run backfills) read and write
every partition of the range in one step, as ``{partition_key: DataFrame}``."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd
from pydantic import PrivateAttr


class PartitionedParquetIOManager(dg.ConfigurableIOManager):
    """Stores ``{partition_key: DataFrame}`` outputs as ``<base>/<asset>/<key part>/.../<last part>.parquet``."""

    base_dir: str
    # Frames this IO manager wrote during the current run, keyed by path with the file's mtime: in an
    # in-process run the next step reads them from memory instead of re-reading thousands of small
    # files. A file changed on disk since (another process) is read from disk again.
    _written: dict[Path, tuple[int, pd.DataFrame]] = PrivateAttr(default_factory=dict)

    def _path(self, asset_key: dg.AssetKey, partition_key: str) -> Path:
        # Multi-partition keys ("C01|2026-11-20") become one folder level per dimension.
        *folders, leaf = str(partition_key).split("|")
        return Path(self.base_dir, *asset_key.path, *folders, f"{leaf}.parquet")

    def handle_output(self, context: dg.OutputContext, obj: dict[str, pd.DataFrame]) -> None:
        keys = context.asset_partition_keys
        missing = [k for k in keys if k not in obj]
        if missing:
            raise ValueError(f"{context.asset_key.to_user_string()} produced no frame for partitions {missing[:5]}")
        for key in keys:
            path = self._path(context.asset_key, key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            obj[key].to_parquet(tmp, index=False)
            tmp.replace(path)  # atomic: readers never see half a file
            self._written[path] = (path.stat().st_mtime_ns, obj[key])

    def load_input(self, context: dg.InputContext) -> dict[str, pd.DataFrame]:
        frames = {}
        for key in context.asset_partition_keys:
            path = self._path(context.asset_key, key)
            if not path.exists():
                raise FileNotFoundError(
                    f"{context.asset_key.to_user_string()} partition {key} has not been materialized ({path})"
                )
            recent = self._written.get(path)
            if recent is not None and recent[0] == path.stat().st_mtime_ns:
                frames[key] = recent[1]  # shared with other readers of this run: assets never mutate inputs
            else:
                frames[key] = pd.read_parquet(path)
        return frames
