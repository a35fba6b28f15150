"""One parquet file per asset and week; partition ranges (single-run backfills) read and write every
partition of the range in one step, as ``{week: DataFrame}``.

A week's file holds every container's rows of that week, with the day and container of each row
(:mod:`rag_pipeline.defs.chain.frames`). A run that covers only some containers or days (a sync tick, a
re-sync of one channel) hands over :class:`CoveredFrames`: the covered cells of the file are replaced by the
run's rows, the others kept. A week without rows has no file at all (an empty week costs its Dagster event
and nothing else); reading one gives an empty frame.

Partition keys are week keys (``YYYY-MM-DD``, a Monday); any other key is refused before anything is
written, naming the key, so a key added around the definitions never names a path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pandas as pd
from pydantic import PrivateAttr

from rag_pipeline.defs.chain.frames import CoveredFrames
from rag_pipeline.pipeline.parquet import write_frame
from rag_pipeline.scheduling.coverage import CONTAINER_COLUMN, DAY_COLUMN

_WEEK_KEY = re.compile(r"\d{4}-\d{2}-\d{2}")


class UnsafePartitionKey(dg.Failure, ValueError):
    """A partition key that cannot name a file under the data folder. A ``Failure`` that skips the step's retry
    policy (the raw assets retry API errors for minutes): the same key is refused the same way every time."""

    def __init__(self, description: str) -> None:
        super().__init__(description=description, allow_retries=False)


class PartitionedParquetIOManager(dg.ConfigurableIOManager):
    """Stores ``{week: DataFrame}`` outputs as ``<base>/<asset>/<week>.parquet``
    (``slack_threads/2024-02-26.parquet``)."""

    base_dir: str
    # Frames this IO manager wrote during the current run, keyed by path with the file's inode and mtime: in an
    # in-process run the next step reads them from memory. A file changed on disk since (another process) is
    # read from disk again.
    _written: dict[Path, tuple[tuple[int, int], pd.DataFrame]] = PrivateAttr(default_factory=dict)

    def _path(self, asset_key: dg.AssetKey, partition_key: str) -> Path:
        key = str(partition_key)
        if not _WEEK_KEY.fullmatch(key):
            raise UnsafePartitionKey(
                f"{asset_key.to_user_string()} partition key {key[:120]!r} is not a week (YYYY-MM-DD): it cannot "
                "name a file"
            )
        # Belt and braces: an asset key comes from the definitions, never from input, but the resolved path is
        # still checked lexically (an operator may point an asset's folder elsewhere with a symlink).
        base = os.path.normpath(os.path.abspath(self.base_dir))
        target = os.path.normpath(os.path.join(base, *asset_key.path, f"{key}.parquet"))
        if not target.startswith(base.rstrip(os.sep) + os.sep):
            raise UnsafePartitionKey(
                f"{asset_key.to_user_string()} partition {key} resolves to {target}, outside the data folder {base}"
            )
        return Path(target)

    def handle_output(self, context: dg.OutputContext, obj: dict[str, pd.DataFrame]) -> None:
        keys = context.asset_partition_keys
        missing = [k for k in keys if k not in obj]
        if missing:
            raise ValueError(f"{context.asset_key.to_user_string()} produced no frame for partitions {missing[:5]}")
        coverage = obj.coverage if isinstance(obj, CoveredFrames) else None
        # Every key is checked before anything is written, so a bad key in a range leaves no partial range behind.
        paths = {key: self._path(context.asset_key, key) for key in keys}
        partial_write = coverage is not None and not coverage.whole
        folder = Path(self.base_dir, *context.asset_key.path)
        folder.mkdir(parents=True, exist_ok=True)
        # Two runs may rewrite parts of the same week at once (a re-sync of one channel during a scheduled tick,
        # Celery workers): each read-merge-write holds the asset's lock, so neither drops the other's rows.
        with _locked(folder / ".lock") if partial_write else contextlib.nullcontext():
            for key, path in paths.items():
                frame = obj[key]
                if partial_write and coverage is not None:
                    kept = self._read(path)
                    if kept is not None and len(kept):
                        if DAY_COLUMN in kept and CONTAINER_COLUMN in kept:
                            kept = kept[~coverage.mask(kept)]
                        frame = pd.concat([kept, frame], ignore_index=True) if len(frame) else kept
                if not len(frame):
                    path.unlink(missing_ok=True)
                    self._written.pop(path, None)
                    continue
                frame = frame.reset_index(drop=True)
                write_frame(path, frame)
                self._written[path] = (_identity(path), frame)

    def _read(self, path: Path) -> pd.DataFrame | None:
        """A partition's frame, from this run's memory where the file is still the one written, else from disk;
        None where the week has no file."""
        try:
            identity = _identity(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        recent = self._written.get(path)
        if recent is not None and recent[0] == identity:
            return recent[1]  # shared with other readers of this run: assets never mutate inputs
        return pd.read_parquet(path)

    def load_input(self, context: dg.InputContext) -> dict[str, pd.DataFrame]:
        frames = {}
        empty = pd.DataFrame()
        for key in context.asset_partition_keys:
            found = self._read(self._path(context.asset_key, key))
            frames[key] = empty if found is None else found
        return frames


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (dropped by the kernel with its process, so a crash never leaves it)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _identity(path: Path) -> tuple[int, int]:
    """Which file a path names, and when it was written."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns
