"""Backup and restore of a data folder (``rag-pipeline backup DEST``, ``rag-pipeline restore SRC``), while the
search service and the Dagster daemon go on running. Dagster-free: the command passes in the index's part
(:mod:`rag_pipeline.index.backup`) and a function reading the sync watermarks.

What a backup holds, in the order it is taken (``docs/guides/backup.md``):

1. ``instance/``: the Dagster instance's folder (``DAGSTER_HOME``, else ``<data dir>/dagster_home``): run storage,
   event logs, schedules: the sync watermarks, what was indexed from which file, the partitions' materializations.
2. ``data/``: everything else of the data folder that a restore needs: weekly parquet files, the principal
   directory, personal tokens, tool outcomes, the request audit and feedback logs, the evaluation reports, the
   learned reranker and calibration, the index's language, the sources' identities, the ingestion pause switch.
3. ``index/``: the embedded index folder, copied under its lock (or one snapshot per collection of a Qdrant server).
4. ``data/`` again for the caches (unless left out): the embedding cache, the query rewrite plans, the LLM grades.

The instance is copied first and the index last, so a restored instance never claims more than the restored data
holds: a sync that ran during the backup has its watermark after the copy of the instance or not at all, and the
first sync after a restore reads that stretch again (writes are idempotent: a document is replaced by id, never
duplicated). Every SQLite database is read through SQLite's online backup API (:mod:`.backup_files`).

Atomic: the backup is written into ``DEST.partial`` (marked ``UNFINISHED`` until its manifest is written), then
renamed to ``DEST``; a previous backup at ``DEST`` is renamed aside (``DEST.old``) for the two renames and then
deleted. A backup killed at any point leaves the previous one intact (at ``DEST``, or at ``DEST.old`` in the instant
between the renames) and a ``DEST.partial`` that restore refuses and the next backup replaces.

The manifest (``manifest.json``) lists every file with its size and sha256, the watermarks read before the copy (a
lower bound of what the backup holds), the layout version and when it was taken. A restore checks every file
against it while copying into a staging folder inside the destination, and only then moves the copies into place.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_pipeline.index.backup import IndexBackup, ServerIndexBackup
from rag_pipeline.pipeline.backup_files import (
    copy_file,
    copy_sqlite,
    fsync_folder,
    hash_file,
    is_sqlite,
)
from rag_pipeline.settings import DataPaths

FORMAT = "rag-pipeline-backup"
LAYOUT_VERSION = 1
MANIFEST = "manifest.json"
PARTIAL_SUFFIX = ".partial"
REPLACED_SUFFIX = ".old"
# Inside DEST.partial from its creation until the manifest is written: what makes a partial backup recognisable
# even if someone renames the folder.
UNFINISHED = "UNFINISHED"
# The restore's staging folder inside the destination (copies are checked there before they are moved into place).
STAGING_PREFIX = ".restore-"

INSTANCE = "instance"
DATA = "data"
INDEX = "index"
CACHES = "caches"  # a part of the summary; its files are under data/

# Never copied: what describes a running process rather than the data (a restore writes a folder nobody runs in),
# unfinished writes, and SQLite's sidecar files (the backup API copies the commits they hold).
TRANSIENT_NAMES = {
    "instance.lock": "the Dagster instance's creation lock",
    "service.json": "the address and pid of the search service running on the folder",
    "ingest_api": "logs of the ingestion API's child processes",
}
TRANSIENT_SUFFIXES = ("-wal", "-shm", "-journal", ".tmp")

ProgressFn = Callable[[str, int, int], None]  # (part, bytes done, bytes in all)


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


class BackupRefused(BackupError):
    """The command was pointed at the wrong place: a destination that holds something else, a folder still in use,
    a backup that is unfinished or of another layout."""


class BackupCorrupt(BackupError):
    """A backup's file differs from its manifest (or is missing): the message names it."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(f"the backup's file {path} {reason}: the backup is damaged and nothing was restored")


def cache_files(paths: DataPaths) -> dict[str, str]:
    """The data folder's caches (relative path -> what leaving it out costs): rebuilt on demand, so a backup may
    leave them out (``--skip-caches``), at that cost."""
    return {
        _relative(paths.embedding_cache, paths.root): "a re-index of a changed input file embeds every chunk again",
        _relative(paths.rewrite_plans, paths.root): "each query rewrite plan costs an LLM call to make again",
        _relative(paths.llm_grades, paths.root): "each LLM reranker grade costs an LLM call to make again",
    }


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _transient(relative: str) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return (
        relative.split("/", 1)[0] in TRANSIENT_NAMES
        or name in TRANSIENT_NAMES
        or name.endswith(TRANSIENT_SUFFIXES)
        or (name.startswith(".") and name.endswith(".tmp"))
    )


# --- the manifest -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ManifestFile:
    """One file of the backup: its path in it (``data/…``, ``instance/…``, ``index/…``), size and sha256."""

    path: str
    size: int
    sha256: str
    kind: str  # "file", "sqlite" (copied through the backup API), "index" (embedded), "snapshot" (server)


@dataclass
class Manifest:
    """What a backup holds and where it came from (``manifest.json``)."""

    created_at: str
    finished_at: str
    data_dir: str
    dagster_home: str | None
    index_engine: str
    caches_included: bool
    watermarks: dict[str, dict[str, str]]
    index_held_seconds: float
    files: list[ManifestFile]
    notes: list[str] = field(default_factory=list)
    format: str = FORMAT
    layout_version: int = LAYOUT_VERSION

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def part_bytes(self) -> dict[str, int]:
        """Bytes per part, the caches apart from the rest of the data folder."""
        caches = {f"{DATA}/{name}" for name in cache_files(DataPaths(root=Path(self.data_dir)))}
        parts: dict[str, int] = {}
        for f in self.files:
            part = CACHES if f.path in caches else f.path.split("/", 1)[0]
            parts[part] = parts.get(part, 0) + f.size
        return parts

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        raw = json.loads(text)
        files = [ManifestFile(**f) for f in raw.pop("files")]
        return cls(files=files, **raw)


@dataclass(frozen=True)
class BackupSources:
    """What :func:`back_up` copies: the data folder, the instance's folder (None: no instance yet), the index's part,
    whether the caches go too, and how to read the sync watermarks (by source, container -> ISO instant)."""

    paths: DataPaths
    dagster_home: Path | None
    index: IndexBackup
    include_caches: bool = True
    watermarks: Callable[[], dict[str, dict[str, str]]] = dict


@dataclass(frozen=True)
class BackupResult:
    path: Path
    manifest: Manifest
    seconds: float
    replaced_previous: bool


# --- backup -------------------------------------------------------------------------------------------------------
def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _check_destination(dest: Path, sources: BackupSources) -> bool:
    """Refuse a destination that would copy the folder into itself or replace something that is not a backup;
    True when a previous backup is there (replaced once the new one is complete)."""
    for folder, what in ((sources.paths.root.resolve(), "data folder"), (sources.dagster_home, "Dagster instance")):
        if folder is None:
            continue
        if _inside(dest, folder.resolve()) or _inside(folder.resolve(), dest):
            raise BackupRefused(
                f"the backup destination {dest} overlaps the {what} {folder}: choose a folder outside it"
            )
    if not dest.exists() and not dest.is_symlink():
        return False
    if not dest.is_dir():
        raise BackupRefused(f"the backup destination {dest} is a file, not a folder")
    if (dest / MANIFEST).is_file() and not (dest / UNFINISHED).exists():
        return True  # a previous backup: replaced when this one is complete
    if any(dest.iterdir()):
        raise BackupRefused(
            f"the backup destination {dest} is a folder that holds something other than a backup: choose another"
        )
    return True


@contextlib.contextmanager
def _destination_lock(dest: Path) -> Iterator[None]:
    """One backup at a time into ``dest`` (a second one would delete the first's partial folder)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(dest.parent / f".{dest.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupRefused(f"another backup into {dest} is running") from None
        yield
    finally:
        os.close(fd)


def _fresh_partial(partial: Path) -> None:
    """An empty ``DEST.partial`` marked unfinished; one left by a killed backup is deleted first."""
    if partial.exists() or partial.is_symlink():
        if not partial.is_dir() or not ((partial / UNFINISHED).exists() or (partial / MANIFEST).exists()):
            raise BackupRefused(f"{partial} exists and is not an unfinished backup: move it away first")
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    (partial / UNFINISHED).write_text("a backup is being written here; it is complete once renamed without .partial\n")


def _walk(root: Path, skip: Sequence[Path] = ()) -> list[str]:
    """Files under ``root`` (relative, sorted), without transient ones and without the folders in ``skip``."""
    found = []
    skipped = {p.resolve() for p in skip}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if (here / d).resolve() not in skipped and not (here / d).is_symlink())
        for name in sorted(files):
            path = here / name
            relative = _relative(path, root)
            if not path.is_symlink() and not _transient(relative):
                found.append(relative)
    return found


def _size(path: Path) -> int:
    """The bytes a copy of ``path`` reads (its data, not its holes)."""
    try:
        stat = path.stat()
    except OSError:
        return 0
    return min(stat.st_size, stat.st_blocks * 512)


class _Bar:
    """Progress of one part in bytes."""

    def __init__(self, progress: ProgressFn | None, part: str, total: int) -> None:
        self.progress, self.part, self.total, self.done = progress, part, total, 0
        self.add(0)

    def add(self, count: int) -> None:
        self.done += count
        if self.progress is not None:
            self.progress(self.part, self.done, max(self.total, self.done))


def _copy_files(root: Path, names: Sequence[str], target: Path, prefix: str, bar: _Bar) -> list[ManifestFile]:
    """Each of ``names`` under ``root`` copied to ``target`` (SQLite through the backup API), with its entry."""
    entries = []
    for name in names:
        source = root / name
        try:
            if is_sqlite(source):
                copied, kind = copy_sqlite(source, target / name), "sqlite"
                bar.add(copied.size)
            else:
                copied, kind = copy_file(source, target / name, bar.add), "file"
        except FileNotFoundError:
            continue  # removed since it was listed (retention, a write's temporary file): not part of the folder now
        except sqlite3.OperationalError:
            if source.exists():
                raise
            continue
        entries.append(ManifestFile(f"{prefix}/{name}", copied.size, copied.sha256, kind))
    return entries


def _instance_notes(home: Path) -> list[str]:
    config = home / "dagster.yaml"
    text = config.read_text(encoding="utf-8") if config.is_file() else ""
    if "postgres" in text or "mysql" in text:
        return [
            f"the Dagster instance at {home} keeps its runs in a database server (dagster.yaml): only its folder was "
            "copied; back the database up with its own tools (pg_dump), before this backup's index"
        ]
    return []


def back_up(
    sources: BackupSources, dest: Path, progress: ProgressFn | None = None, clock: Callable[[], float] = time.monotonic
) -> BackupResult:
    """Write a complete backup of ``sources`` to ``dest`` (replacing a previous backup there only once complete)."""
    started = clock()
    created = datetime.now(UTC).isoformat(timespec="seconds")
    dest = dest.absolute()
    replaces = _check_destination(dest, sources)
    partial = dest.with_name(dest.name + PARTIAL_SUFFIX)
    with _destination_lock(dest):
        _fresh_partial(partial)
        # Read before anything is copied: the instance copied next holds these or later ones.
        watermarks = sources.watermarks()
        files: list[ManifestFile] = []
        notes: list[str] = []
        home = sources.dagster_home
        if home is not None and home.is_dir():
            names = _walk(home)
            bar = _Bar(progress, INSTANCE, sum(_size(home / n) for n in names))
            files += _copy_files(home, names, partial / INSTANCE, INSTANCE, bar)
            notes += _instance_notes(home)
        else:
            notes.append("no Dagster instance folder: nothing of the instance was copied")

        root = sources.paths.root
        skip = [sources.paths.qdrant, *([home] if home is not None else [])]
        caches = cache_files(sources.paths)
        names = _walk(root, skip)
        data_names = [n for n in names if n not in caches]
        bar = _Bar(progress, DATA, sum(_size(root / n) for n in data_names))
        files += _copy_files(root, data_names, partial / DATA, DATA, bar)

        index_bar = _Bar(
            progress, INDEX, _folder_bytes(sources.paths.qdrant) if sources.index.engine == "qdrant-edge" else 0
        )
        copy = sources.index.copy_into(partial / INDEX, index_bar.add)
        kind = "index" if sources.index.engine == "qdrant-edge" else "snapshot"
        for name in copy.files:
            # Hashed now, on the copy: the index's lock was held for the copy alone.
            hashed = hash_file(partial / INDEX / name, sync=True)
            files.append(ManifestFile(f"{INDEX}/{name}", hashed.size, hashed.sha256, kind))
        if copy.note:
            notes.append(copy.note)

        cache_names = [n for n in names if n in caches]
        if sources.include_caches:
            bar = _Bar(progress, CACHES, sum(_size(root / n) for n in cache_names))
            files += _copy_files(root, cache_names, partial / DATA, DATA, bar)
        elif cache_names:
            notes += [f"left out (--skip-caches): {name}; without it {caches[name]}" for name in cache_names]

        manifest = Manifest(
            created_at=created,
            finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
            data_dir=str(root),
            dagster_home=str(home) if home is not None else None,
            index_engine=sources.index.engine,
            caches_included=sources.include_caches,
            watermarks=watermarks,
            index_held_seconds=round(copy.held_seconds, 4),
            files=files,
            notes=notes,
        )
        _write_whole(partial / MANIFEST, manifest.to_json())
        (partial / UNFINISHED).unlink()
        fsync_folder(partial)
        _swap_into_place(partial, dest, replaces)
    return BackupResult(dest, manifest, clock() - started, replaces)


def _folder_bytes(folder: Path) -> int:
    return sum(_size(p) for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def _write_whole(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)


def _swap_into_place(partial: Path, dest: Path, replaces: bool) -> None:
    """``partial`` renamed to ``dest``; a previous backup there is renamed aside first and deleted after."""
    old = dest.with_name(dest.name + REPLACED_SUFFIX)
    if replaces:
        if old.exists():
            shutil.rmtree(old)  # left by an interrupted deletion, while a complete backup sits at dest
        dest.rename(old)
    partial.rename(dest)
    fsync_folder(dest.parent)
    if old.exists():
        shutil.rmtree(old)


# --- restore ------------------------------------------------------------------------------------------------------
def read_backup(source: Path) -> Manifest:
    """The manifest of the complete backup at ``source``; :class:`BackupRefused` for anything else (an unfinished
    backup, a folder that is not a backup, another layout)."""
    if source.name.endswith(PARTIAL_SUFFIX) or (source / UNFINISHED).exists():
        raise BackupRefused(
            f"{source} is an unfinished backup (killed, or still being written): it cannot be restored; restore the "
            f"complete backup beside it"
        )
    if not source.is_dir():
        old = source.with_name(source.name + REPLACED_SUFFIX)
        if (old / MANIFEST).is_file():
            raise BackupRefused(
                f"no backup at {source}, but {old} is a complete one (a backup was stopped while it replaced it): "
                f"restore {old}"
            )
        raise BackupRefused(f"no backup at {source}")
    try:
        manifest = Manifest.from_json((source / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BackupRefused(f"{source} is not a backup (no {MANIFEST})") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise BackupCorrupt(MANIFEST, f"cannot be read ({type(exc).__name__}: {exc})") from None
    if manifest.format != FORMAT or manifest.layout_version > LAYOUT_VERSION:
        raise BackupRefused(
            f"{source} holds layout {manifest.layout_version} of {manifest.format!r}; this version reads layout "
            f"{LAYOUT_VERSION} and older: restore it with a newer rag-pipeline"
        )
    return manifest


def _check(entry: ManifestFile, size: int, sha256: str) -> None:
    if size != entry.size:
        raise BackupCorrupt(entry.path, f"holds {size} bytes where the manifest says {entry.size}")
    if sha256 != entry.sha256:
        raise BackupCorrupt(entry.path, "does not match its sha256 in the manifest")


def _backup_file(source: Path, entry: ManifestFile) -> Path:
    path = source / entry.path
    if not path.is_file():
        raise BackupCorrupt(entry.path, "is missing")
    return path


def verify(source: Path, progress: ProgressFn | None = None) -> Manifest:
    """Check every file of the backup at ``source`` against its manifest, writing nothing."""
    manifest = read_backup(source)
    bar = _Bar(progress, "verify", manifest.total_bytes)
    for entry in manifest.files:
        hashed = hash_file(_backup_file(source, entry), bar.add)
        _check(entry, hashed.size, hashed.sha256)
    return manifest


@dataclass(frozen=True)
class RestoreTarget:
    """Where a restore writes: the data folder, the Dagster instance's folder, and the index (embedded: the data
    folder's ``qdrant``; a server: ``server``)."""

    paths: DataPaths
    dagster_home: Path
    server: ServerIndexBackup | None = None
    index_holder: Callable[[], str | None] = lambda: None  # who holds the embedded index now, if anyone


@dataclass(frozen=True)
class RestoreResult:
    manifest: Manifest
    files: int
    bytes: int
    seconds: float
    replaced: list[str]  # what --force deleted first


def _entries(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if not p.name.startswith(STAGING_PREFIX))


def _destinations(manifest: Manifest, target: RestoreTarget) -> dict[str, Path]:
    """Backup path -> where its file goes (snapshots are uploaded, not written)."""
    out = {}
    for entry in manifest.files:
        part, _, rest = entry.path.partition("/")
        if part == DATA:
            out[entry.path] = target.paths.root / rest
        elif part == INSTANCE:
            out[entry.path] = target.dagster_home / rest
        elif part == INDEX and entry.kind == "index":
            out[entry.path] = target.paths.qdrant / rest
    return out


def _check_engine(manifest: Manifest, target: RestoreTarget) -> None:
    has_index = any(f.path.startswith(f"{INDEX}/") for f in manifest.files)
    embedded_backup = manifest.index_engine == "qdrant-edge"
    if has_index and embedded_backup and target.server is not None:
        raise BackupRefused(
            "the backup holds an embedded index but QDRANT_URL names a server: unset QDRANT_URL to restore it"
        )
    if has_index and not embedded_backup and target.server is None:
        raise BackupRefused(
            "the backup holds snapshots of a Qdrant server's collections: set QDRANT_URL to restore them"
        )


def restore(
    source: Path, target: RestoreTarget, *, force: bool = False, progress: ProgressFn | None = None
) -> RestoreResult:
    """Restore the backup at ``source`` into ``target``: every file is checked against the manifest while it is
    copied into a staging folder, and moved into place only when all are good. A destination that holds anything is
    refused unless ``force`` (which deletes what it holds first); one in use (the index's lock held) always is."""
    started = time.monotonic()
    manifest = read_backup(source)
    _check_engine(manifest, target)
    root, home = target.paths.root.absolute(), target.dagster_home.absolute()
    roots = [root] if _inside(home, root) else [root, home]
    holder = target.index_holder()
    if holder is not None:
        raise BackupRefused(f"the index at {target.paths.qdrant} is {holder}: stop the search service, the daemon and "
                            "every run on this folder before restoring into it")  # fmt: skip
    occupied = [str(p) for r in roots for p in _entries(r)]
    occupied_collections = target.server.non_empty() if target.server is not None else []
    if (occupied or occupied_collections) and not force:
        what = occupied[:3] + [f"collection {c}" for c in occupied_collections]
        raise BackupRefused(f"the restore destination is not empty ({', '.join(what)}…): pass --force to replace it")

    destinations = _destinations(manifest, target)
    staging = {r: r / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}" for r in roots}

    def staged(final: Path) -> Path:
        # The instance's folder has a staging folder of its own only when it lies outside the data folder.
        base = home if len(roots) > 1 and _inside(final, home) else root
        return staging[base] / final.relative_to(base)

    bar = _Bar(progress, "restore", manifest.total_bytes)
    try:
        snapshots: dict[str, Path] = {}
        for entry in manifest.files:
            path = _backup_file(source, entry)
            if entry.path in destinations:
                copied = copy_file(path, staged(destinations[entry.path]), bar.add)
            else:  # a server snapshot: checked here, uploaded once everything is checked
                copied = hash_file(path, bar.add)
                snapshots[Path(entry.path).name.removesuffix(".snapshot")] = path
            _check(entry, copied.size, copied.sha256)
        replaced = []
        if force:
            for r in roots:
                for existing in _entries(r):
                    replaced.append(str(existing))
                    _remove(existing)
        for r, stage in staging.items():
            r.mkdir(parents=True, exist_ok=True)
            for entry_path in _entries(stage) if stage.exists() else []:
                entry_path.rename(r / entry_path.name)
            fsync_folder(r)
        if target.server is not None and snapshots:
            checksums = {
                Path(f.path).name.removesuffix(".snapshot"): f.sha256 for f in manifest.files if f.kind == "snapshot"
            }
            target.server.restore(snapshots, checksums)
    finally:
        for stage in staging.values():
            shutil.rmtree(stage, ignore_errors=True)
    return RestoreResult(manifest, len(manifest.files), manifest.total_bytes, time.monotonic() - started, replaced)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def summary(manifest: Manifest) -> dict[str, Any]:
    """The manifest without its file list, for ``--json`` and the terminal."""
    return {
        "created_at": manifest.created_at,
        "finished_at": manifest.finished_at,
        "data_dir": manifest.data_dir,
        "dagster_home": manifest.dagster_home,
        "index_engine": manifest.index_engine,
        "caches_included": manifest.caches_included,
        "files": len(manifest.files),
        "bytes": manifest.total_bytes,
        "bytes_by_part": manifest.part_bytes(),
        "index_held_seconds": manifest.index_held_seconds,
        "watermarks": manifest.watermarks,
        "notes": manifest.notes,
        "layout_version": manifest.layout_version,
    }
