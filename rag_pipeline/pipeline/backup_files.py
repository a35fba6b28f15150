"""File copies a backup and a restore are made of: sparse files kept sparse, SQLite databases read through SQLite's
online backup API, each copy's size and sha256, and writes made durable before they are named complete.

Why sparse-aware: the embedded engine (qdrant-edge) preallocates its segment files as holes, so the test kit's small
index holds 21 MB of data in 541 MB of files; a plain copy writes every hole out as zeros (seconds, and the backup
25 times its real size). Here the data extents are found with ``SEEK_DATA``/``SEEK_HOLE`` and only they are written;
the hash still covers every byte (holes read as zeros), so ``sha256sum`` of a restored file agrees with the manifest.

Why the backup API for SQLite: a database being written (the embedding cache, the Dagster run storage, the directory)
copied byte by byte can pair a page of one transaction with a page of the next, and its ``-wal`` file holds commits
the main file does not have yet. ``sqlite3.Connection.backup`` copies one committed state, the WAL's included, while
the database stays in use.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

SQLITE_HEADER = b"SQLite format 3\x00"
# Read and hashed in pieces of this size; holes are hashed from one shared buffer of zeros of the same size.
CHUNK = 1 << 20
_ZEROS = bytes(CHUNK)
# A writer holding the database (a Dagster run committing events) keeps the backup waiting this long at most.
SQLITE_BUSY_SECONDS = 60.0

BytesFn = Callable[[int], None]  # called with the bytes just copied (progress)


@dataclass(frozen=True)
class Copied:
    """One file as it was copied: its logical size and the sha256 of its content."""

    size: int
    sha256: str


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` is a SQLite database: its header, or a write-ahead log beside it (a database created in WAL
    mode may hold everything in its ``-wal`` file until the first checkpoint)."""
    if Path(f"{path}-wal").exists():
        return True
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _hash_zeros(digest: hashlib._Hash, length: int) -> None:
    while length > 0:
        piece = min(length, CHUNK)
        digest.update(_ZEROS[:piece] if piece < CHUNK else _ZEROS)
        length -= piece


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    """The (start, end) byte ranges of ``fd`` that hold data; the rest are holes. A file system without
    ``SEEK_DATA`` reports the whole file as data."""
    extents = []
    position = 0
    try:
        while position < size:
            try:
                start = os.lseek(fd, position, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data after position: the rest is a hole
                    break
                raise
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            extents.append((start, end))
            position = end
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise
        return [(0, size)] if size else []
    return extents


def copy_file(
    source: Path, target: Path, on_bytes: BytesFn | None = None, *, digest: bool = True, sync: bool = True
) -> Copied:
    """``source`` copied to ``target`` (created or truncated) with its holes left as holes; its size and sha256.

    ``digest=False, sync=False`` is the copy made under the index's lock: no hash, no fsync (each costs more than the
    copy of a small file: 322 fsyncs took 1.9 s of the test index's 2 s), and the data moved by the kernel
    (``copy_file_range``: a clone where the file system shares extents). :func:`hash_file` hashes and syncs the copy
    afterwards, once the lock is given back.

    The size is the one the file had when it was opened: a file that grows meanwhile (a log being appended) is
    copied as it was then."""
    target.parent.mkdir(parents=True, exist_ok=True)
    hasher = hashlib.sha256()
    with source.open("rb") as src, target.open("wb") as dst:
        size = os.fstat(src.fileno()).st_size
        position = 0
        for start, end in _extents(src.fileno(), size):
            if digest:
                _hash_zeros(hasher, start - position)
                remaining = _copy_hashing(src, dst, start, end, hasher, on_bytes)
                _hash_zeros(hasher, remaining)
            else:
                _copy_in_kernel(src.fileno(), dst.fileno(), start, end, on_bytes)
            position = end
        if digest:
            _hash_zeros(hasher, size - position)
        dst.truncate(size)  # a trailing hole: the size without writing it
        if sync:
            dst.flush()
            os.fsync(dst.fileno())
    return Copied(size, hasher.hexdigest() if digest else "")


def _copy_hashing(
    src: BinaryIO, dst: BinaryIO, start: int, end: int, hasher: hashlib._Hash, on_bytes: BytesFn | None
) -> int:
    """Bytes ``start``..``end`` copied and hashed; returns how many could not be read (the file was truncated
    meanwhile: they read as zeros, as a hole would)."""
    dst.seek(start)
    read = 0
    for data in _read_range(src, start, end, on_bytes):
        dst.write(data)
        hasher.update(data)
        read += len(data)
    return end - start - read


def _read_range(handle: BinaryIO, start: int, end: int, on_bytes: BytesFn | None) -> Iterator[bytes]:
    """Bytes ``start``..``end`` of ``handle`` in pieces of at most ``CHUNK``, each counted to ``on_bytes``; fewer when
    the file ends sooner (it was truncated meanwhile)."""
    handle.seek(start)
    remaining = end - start
    while remaining > 0:
        data = handle.read(min(CHUNK, remaining))
        if not data:
            return
        yield data
        # Counted once the caller has used the piece, as a copy reports what it wrote.
        if on_bytes is not None:
            on_bytes(len(data))
        remaining -= len(data)


def _copy_in_kernel(src: int, dst: int, start: int, end: int, on_bytes: BytesFn | None) -> None:
    """Bytes ``start``..``end`` copied by the kernel (no trip through Python's memory)."""
    position = start
    while position < end:
        try:
            moved = os.copy_file_range(src, dst, min(end - position, 1 << 30), position, position)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            moved = os.pwrite(dst, os.pread(src, min(end - position, CHUNK), position), position)
        if moved == 0:  # truncated meanwhile
            return
        position += moved
        if on_bytes is not None:
            on_bytes(moved)


def hash_file(path: Path, on_bytes: BytesFn | None = None, *, sync: bool = False) -> Copied:
    """The size and sha256 of ``path``, reading only its data extents (holes are hashed as zeros without reading);
    ``sync`` fsyncs it too (a copy made without)."""
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        if sync:
            os.fsync(handle.fileno())
        size = os.fstat(handle.fileno()).st_size
        position = 0
        for start, end in _extents(handle.fileno(), size):
            _hash_zeros(hasher, start - position)
            read = 0
            for data in _read_range(handle, start, end, on_bytes):
                hasher.update(data)
                read += len(data)
            _hash_zeros(hasher, end - start - read)
            position = end
        _hash_zeros(hasher, size - position)
    return Copied(size, hasher.hexdigest())


def copy_sqlite(source: Path, target: Path) -> Copied:
    """One committed state of the database ``source`` (its WAL included) written to ``target`` through SQLite's online
    backup API, while other connections go on using it; then hashed.

    In one step (``pages=-1``): a backup in several steps restarts whenever another connection writes between two
    steps, so a busy database (the embedding cache during a run) could keep it restarting for ever. One step holds
    a read transaction for the copy: in WAL mode writers go on, in rollback mode they wait for it (milliseconds for
    the Dagster databases of a data folder)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    # mode=rw: never create a database that vanished since it was listed (the caller skips it instead).
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=rw", uri=True, timeout=SQLITE_BUSY_SECONDS)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst, pages=-1)
        finally:
            dst.close()
    finally:
        src.close()
    for sidecar in ("-wal", "-shm", "-journal"):
        Path(f"{target}{sidecar}").unlink(missing_ok=True)  # none after a clean close; never part of a backup
    with target.open("rb+") as handle:
        os.fsync(handle.fileno())
    return hash_file(target)


def fsync_folder(folder: Path) -> None:
    """Make the entries of ``folder`` (files created, renamed) durable, as a rename's atomicity needs."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
