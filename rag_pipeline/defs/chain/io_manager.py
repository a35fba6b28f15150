"""One parquet file per asset partition; partition ranges (single-run backfills) read and write
every partition of the range in one step, as ``{partition_key: DataFrame}``.

Partition keys come from outside (channel ids, project keys), so a key becomes a path only when each
of its parts is a valid container id (``rag_pipeline.sources.identifiers``; ISO days pass too) and
the file it names lies under ``base_dir``. Anything else is refused, naming the key: discovery never
registers such a key, so one reaching this point was added around it (by hand, through the UI or the
instance API), and encoding it instead would only give an unreviewed key a place on disk.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import PrivateAttr

from rag_pipeline.sources.identifiers import InvalidIdentifier, check_container_id

# Dagster joins the dimensions of a multi-partition key with this separator.
_KEY_SEPARATOR = "|"


class UnsafePartitionKey(dg.Failure, ValueError):
    """A partition key that cannot name a file under the data folder. A ``Failure`` that skips the step's retry
    policy (the raw assets retry API errors for minutes): the same key is refused the same way every time."""

    def __init__(self, description: str) -> None:
        super().__init__(description=description, allow_retries=False)


class PartitionedParquetIOManager(dg.ConfigurableIOManager):
    """Stores ``{partition_key: DataFrame}`` outputs as ``<base>/<asset>/<key part>/.../<last part>.parquet``
    (``slack_threads/C0123/2024-03-01.parquet``, ``jira_issues/2024-03-01/TIMOB.parquet``: the dimensions in
    Dagster's key order)."""

    base_dir: str
    # Frames this IO manager wrote during the current run, keyed by path with the file's inode and mtime: in an
    # in-process run the next step reads them from memory instead of re-reading thousands of small
    # files. A file changed on disk since (another process) is read from disk again.
    _written: dict[Path, tuple[tuple[int, int], pd.DataFrame]] = PrivateAttr(default_factory=dict)
    # Digests of the empty frames' Arrow schemas by columns and dtypes: deriving the schema costs ~0.5 ms, as much
    # as the link it names, and a backfill's tens of thousands of empty frames share a handful of schemas.
    _empty_digests: dict[tuple[tuple[str, str], ...], str] = PrivateAttr(default_factory=dict)
    # Checked paths by (asset, partition key, dimensions): every step's inputs and output name the same range's
    # tens of thousands of files, and checking a key costs ~0.1 ms (~8 s of the demo's first index); a hit costs
    # ~8 µs where working the path out again costs ~25 µs (a pydantic private attribute alone costs ~3 µs).
    _paths: dict[tuple[tuple[str, ...], str, int | None], Path] = PrivateAttr(default_factory=dict)
    # Keys whose parts passed the checks (by key and number of dimensions), for the other assets of the range.
    _checked_parts: dict[tuple[str, int | None], list[str]] = PrivateAttr(default_factory=dict)
    _base: str = PrivateAttr(default="")

    def _folder(self) -> str:
        """The data folder as an absolute, normalized path (worked out on first use)."""
        if not self._base:
            self._base = os.path.normpath(os.path.abspath(self.base_dir))
        return self._base

    def _path(
        self, asset_key: dg.AssetKey, partition_key: str, partitions_def: dg.PartitionsDefinition | None = None
    ) -> Path:
        """The file of one partition, or :class:`UnsafePartitionKey` when the key cannot be one."""
        key = str(partition_key)
        # A multi-partition key has one part per dimension; more parts would mean a '|' inside a value
        # ("a|b" as a channel id), which would silently write the partition one folder deeper.
        expected = None
        if isinstance(partitions_def, dg.MultiPartitionsDefinition):
            expected = len(partitions_def.partitions_defs)
        elif partitions_def is not None:
            expected = 1
        cached = self._paths.get((tuple(asset_key.path), key, expected))
        if cached is None:
            cached = self._paths[(tuple(asset_key.path), key, expected)] = self._checked_path(asset_key, key, expected)
        return cached

    def _checked_path(self, asset_key: dg.AssetKey, key: str, expected: int | None) -> Path:
        parts = self._checked_parts.get((key, expected))
        if parts is None:
            parts = key.split(_KEY_SEPARATOR)
            if expected is not None and len(parts) != expected:
                raise UnsafePartitionKey(
                    f"{_shown(asset_key, key)} has {len(parts)} parts separated by '|', expected {expected}"
                )
            for part in parts:
                try:
                    check_container_id(part, f"{_shown(asset_key, key)} cannot name a file: its part")
                except InvalidIdentifier as exc:
                    raise UnsafePartitionKey(f"{exc} (channels and projects are registered by discovery)") from None
            self._checked_parts[(key, expected)] = parts
        *folders, leaf = parts
        # Belt and braces for the charset above: compared lexically (no symlink resolution), so an operator may
        # still point an asset's folder at another disk with a symlink; input names cannot create symlinks.
        base = self._folder()
        target = os.path.normpath(os.path.join(base, *asset_key.path, *folders, f"{leaf}.parquet"))
        if not target.startswith(base.rstrip(os.sep) + os.sep) or target == base:
            raise UnsafePartitionKey(f"{_shown(asset_key, key)} resolves to {target}, outside the data folder {base}")
        return Path(target)

    def handle_output(self, context: dg.OutputContext, obj: dict[str, pd.DataFrame]) -> None:
        keys = context.asset_partition_keys
        missing = [k for k in keys if k not in obj]
        if missing:
            raise ValueError(f"{context.asset_key.to_user_string()} produced no frame for partitions {missing[:5]}")
        partitions_def = _partitions_def(context)
        # Every key is checked before anything is written, so a bad key in a range leaves no partial range behind.
        paths = {key: self._path(context.asset_key, key, partitions_def) for key in keys}
        folders: set[Path] = set()
        # Empty frames by identity (the chain's steps share one empty frame among a range's empty partitions):
        # the file each one is linked to, worked out once per step instead of once per partition.
        empty_files: dict[int, Path] = {}
        # A link is its template's file: one stat per template instead of one per partition.
        template_identity: dict[Path, tuple[int, int]] = {}
        for key, path in paths.items():
            frame = obj[key]
            if path.parent not in folders:
                path.parent.mkdir(parents=True, exist_ok=True)
                folders.add(path.parent)
            template = None
            if not len(frame):
                try:
                    if id(frame) not in empty_files:
                        empty_files[id(frame)] = self._empty_file(context.asset_key, frame)
                    template = empty_files[id(frame)]
                    if _link(template, path):  # a new copy of the template took over: its own identity
                        template_identity.pop(template, None)
                except OSError:  # no hard links here, or the partition's folder is on another disk
                    template = None
            if template is None:
                _write_atomically(path, partial(_write_parquet, frame))
                self._written[path] = (_identity(path), frame)
                continue
            if template not in template_identity:
                template_identity[template] = _identity(path)
            self._written[path] = (template_identity[template], frame)

    def _empty_file(self, asset_key: dg.AssetKey, frame: pd.DataFrame) -> Path:
        """The asset's file of an empty frame with these columns and types, written once, for empty partitions
        to be hard links to (where the file system has none, the caller writes each frame).

        Most partitions of a first backfill are empty (a day on which a project had no issue: 64,515 of the
        demo's 70,825 partition files), and writing an empty parquet costs as much as a small one (~2.5 ms):
        ~160 s of the demo's first run. A link costs ~0.1 ms and is the same file to every reader. Files are
        only ever replaced, never written in place, so a later write of one partition leaves the others
        empty."""
        # Named by the Arrow schema with its pandas metadata: columns, types, and what pandas restores on read.
        # repr() of a dtype names a categorical's categories too, so equal keys mean equal schemas.
        dtypes = tuple((str(column), repr(dtype)) for column, dtype in frame.dtypes.items())
        digest = self._empty_digests.get(dtypes)
        if digest is None:
            schema = pa.Schema.from_pandas(frame, preserve_index=False)
            digest = self._empty_digests[dtypes] = hashlib.sha256(schema.serialize().to_pybytes()).hexdigest()[:16]
        template = Path(self._folder(), *asset_key.path, f".empty-{digest}.parquet")
        if not template.exists():
            _write_atomically(template, lambda tmp: _write_parquet(frame, tmp))
        return template

    def load_input(self, context: dg.InputContext) -> dict[str, pd.DataFrame]:
        frames = {}
        partitions_def = _partitions_def(context)
        for key in context.asset_partition_keys:
            path = self._path(context.asset_key, key, partitions_def)
            try:
                identity = _identity(path)  # one stat: whether it exists, and which file it is
            except (FileNotFoundError, NotADirectoryError):
                raise FileNotFoundError(
                    f"{context.asset_key.to_user_string()} partition {key} has not been materialized ({path})"
                ) from None
            recent = self._written.get(path)
            if recent is not None and recent[0] == identity:
                frames[key] = recent[1]  # shared with other readers of this run: assets never mutate inputs
            else:
                frames[key] = pd.read_parquet(path)
        return frames


def _shown(asset_key: dg.AssetKey, key: str) -> str:
    """How an error names a partition."""
    return f"{asset_key.to_user_string()} partition key {key[:120]!r}"


def _write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """The frame as ``frame.to_parquet(path, index=False)`` stores it (the same Arrow table and pandas
    metadata, snappy), without column statistics or dictionary pages: a partition's file is read whole, never
    filtered, and for a few rows of long text both only cost. 1.0 ms instead of 2.5 ms for a partition's file
    (0.9 instead of 2.5 for dense vectors), and about a third smaller."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, path, use_dictionary=False, write_statistics=False)


def _identity(path: Path) -> tuple[int, int]:
    """Which file a path names, and when it was written: empty partitions share one file and its mtime."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def _link(template: Path, path: Path) -> bool:
    """``path`` becomes a hard link to ``template`` (an empty partition's file).

    A partition that is already that file (an empty day indexed empty again) is left alone, and a new one is
    linked straight to its name, which is atomic; only a partition that held other data takes a temp name and
    a rename. When the template's link count runs out (ext4 allows 65,000), the template name gets a fresh
    copy, which takes the next ones (earlier links keep the old file). True when that happened."""
    try:
        if os.path.samefile(template, path):
            return False
    except FileNotFoundError:
        pass
    for attempt in range(2):
        try:
            try:
                os.link(template, path)
            except FileExistsError:
                _write_atomically(path, lambda tmp: os.link(template, tmp))
            return attempt > 0
        except OSError as exc:
            if exc.errno != errno.EMLINK or attempt:
                raise
            _write_atomically(template, partial(shutil.copyfile, template))
    raise AssertionError("unreachable: the second attempt returns or raises")


def _write_atomically(path: Path, fill: Callable[[Path], object]) -> None:
    """``fill`` a temp name of its own, then rename it to ``path``: readers and linkers never see half a file,
    and two processes writing the same path never rename each other's file."""
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex}.tmp")
    try:
        fill(tmp)
        tmp.replace(path)
    finally:
        # Also where the rename did nothing: renaming a link onto another link of the same file (an empty
        # partition written empty again) leaves both names in place on POSIX.
        tmp.unlink(missing_ok=True)


def _partitions_def(context: dg.OutputContext | dg.InputContext) -> dg.PartitionsDefinition | None:
    """The asset's partitions definition, or None where the context has none (contexts built by hand)."""
    try:
        return context.asset_partitions_def
    except dg.DagsterInvariantViolationError:
        return None
