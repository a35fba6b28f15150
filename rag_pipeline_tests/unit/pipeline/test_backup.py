"""Backup and restore of a data folder (:mod:`rag_pipeline.pipeline.backup`) on a crafted folder with a real embedded
index: what is copied and what is not, the index copied under its lock while a writer writes, a tampered file named,
destinations refused, and a backup killed with SIGKILL leaving the previous one intact."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from rag_pipeline.index.backup import EmbeddedIndexBackup
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import StorePoint
from rag_pipeline.index.store_lock import FolderLock
from rag_pipeline.index.writer import DocumentPoints, write_documents
from rag_pipeline.pipeline.backup import (
    MANIFEST,
    PARTIAL_SUFFIX,
    REPLACED_SUFFIX,
    UNFINISHED,
    BackupCorrupt,
    BackupRefused,
    BackupSources,
    RestoreTarget,
    back_up,
    read_backup,
    restore,
    verify,
)
from rag_pipeline.pipeline.backup_files import hash_file
from rag_pipeline.settings import DataPaths
from rag_pipeline.vectors.sparse import Bm25Encoder
from rag_pipeline_tests.kit.paths import REPO_ROOT
from rag_pipeline_tests.kit.serving_fixtures import copy_index

BM25 = Bm25Encoder()
WATERMARKS = {"slack": {"C0GENERAL": "2026-12-01T00:00:00+00:00"}}


def _document(name: str) -> DocumentPoints:
    """One document: a parent and two children (4-dimensional vectors)."""
    base = {"document_id": name, "source": "slack", "container": "C1", "version": 1.0, "content_hash": name,
            "acl": {"public": True, "users": [], "groups": []}, "updated": "2024-01-01T00:00:00+00:00"}  # fmt: skip
    parent_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}/parent"))
    parent = StorePoint(parent_id, {**base, "level": "parent", "text": f"{name} parent"})
    children = [
        StorePoint(
            str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}/child/{i}")),
            {**base, "level": "child", "parent_id": parent_id, "text": f"{name} text {i}"},
            dense=[1.0, float(i), 0.5, 0.25],
            sparse=BM25.encode_documents([f"{name} text {i}"])[0],
        )
        for i in range(2)
    ]
    return DocumentPoints(name, 1.0, [parent], children)


def _sqlite(path: Path, rows: int, wal: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(rows)])
    db.commit()
    db.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with one of each kind of file, transient ones included, and a real embedded index (built once:
    creating the shards takes seconds)."""
    paths = DataPaths(root=tmp_path_factory.mktemp("backup_template") / "data")
    (paths.parquet / "slack_threads").mkdir(parents=True)
    (paths.parquet / "slack_threads" / "2024-W09.parquet").write_bytes(os.urandom(3000))
    (paths.parquet / "slack_threads" / ".2024-W10.abc.tmp").write_bytes(b"half a write")
    _sqlite(paths.directory, 10)
    _sqlite(paths.tokens, 2)
    _sqlite(paths.embedding_cache, 50, wal=True)
    paths.language.write_text('{"language": "en"}\n')
    (paths.root / "service.json").write_text('{"pid": 1}\n')
    (paths.reports / "latest").mkdir(parents=True)
    paths.calibration.write_text("{}\n")
    (paths.request_audit).mkdir()
    (paths.request_audit / "2026-12-01.jsonl").write_text('{"documents": ["a"]}\n')
    home = paths.dagster_home
    (home / "history" / "runs").mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    (home / "instance.lock").write_text("")
    _sqlite(home / "history" / "runs.db", 5)
    _sqlite(home / "history" / "runs" / "index.db", 5)
    store = EdgeVectorStore(paths.qdrant)
    store.create_collections(4)
    write_documents(store, [_document(f"d{i}") for i in range(3)])
    store.close()
    return paths.root


@pytest.fixture
def paths(template: Path, tmp_path: Path) -> DataPaths:
    """A copy of the template folder for one test (sparse, as the engine wrote it)."""
    return DataPaths(root=copy_index(template, tmp_path / "data"))


def _sources(paths: DataPaths, **kwargs: object) -> BackupSources:
    index = EmbeddedIndexBackup(paths.qdrant, wait_seconds=30)
    return BackupSources(paths, paths.dagster_home, index, watermarks=lambda: WATERMARKS, **kwargs)  # type: ignore[arg-type]


def _target(root: Path, **kwargs: object) -> RestoreTarget:
    paths = DataPaths(root=root)
    return RestoreTarget(paths, paths.dagster_home, **kwargs)  # type: ignore[arg-type]


def _files(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hash_file(p).sha256
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


def _counts(folder: Path) -> tuple[int, int]:
    store = EdgeVectorStore(folder, wait_seconds=30)
    try:
        return store.count(store.names.children), store.count(store.names.parents)
    finally:
        store.close()


def _rows(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT count(*) FROM t").fetchone()[0])
    finally:
        db.close()


def test_a_restored_folder_holds_everything_but_what_describes_a_running_process(
    paths: DataPaths, tmp_path: Path
) -> None:
    result = back_up(_sources(paths), tmp_path / "backup")
    manifest = result.manifest
    assert result.path == tmp_path / "backup" and not result.replaced_previous
    assert not (tmp_path / f"backup{PARTIAL_SUFFIX}").exists() and not (tmp_path / "backup" / UNFINISHED).exists()
    assert manifest.watermarks == WATERMARKS and manifest.layout_version == 1 and manifest.caches_included
    assert manifest.index_engine == "qdrant-edge" and manifest.index_held_seconds < 5
    parts = manifest.part_bytes()
    assert set(parts) == {"instance", "data", "index", "caches"}, parts
    kinds = {f.path: f.kind for f in manifest.files}
    assert kinds["data/directory.sqlite"] == "sqlite" and kinds["instance/history/runs.db"] == "sqlite"
    assert kinds["data/language.json"] == "file" and kinds["index/rag_children/edge_config.json"] == "index"

    restored = restore(tmp_path / "backup", _target(tmp_path / "restored"))
    assert restored.files == len(manifest.files) and restored.replaced == []
    new = DataPaths(root=tmp_path / "restored")
    original, copy = _files(paths.root), _files(new.root)
    transient = {"service.json", "dagster_home/instance.lock", "qdrant/store.lock",
                 "parquet/slack_threads/.2024-W10.abc.tmp"}  # fmt: skip
    assert set(copy) == set(original) - transient, set(original) ^ set(copy)
    for name in copy:
        if not name.endswith(".sqlite") and not name.endswith(".db"):
            assert copy[name] == original[name], name
    for database in ("directory.sqlite", "tokens.sqlite", "embedding_cache.sqlite", "dagster_home/history/runs.db"):
        assert _rows(new.root / database) == _rows(paths.root / database), database
    assert _counts(new.qdrant) == _counts(paths.qdrant) == (6, 3)
    assert not [p for p in new.root.iterdir() if p.name.startswith(".restore-")]
    # The backup checks out, file by file, afterwards too.
    assert verify(tmp_path / "backup").files == manifest.files


def test_the_caches_can_be_left_out_and_the_backup_says_what_that_costs(paths: DataPaths, tmp_path: Path) -> None:
    manifest = back_up(_sources(paths, include_caches=False), tmp_path / "backup").manifest
    assert not manifest.caches_included and "caches" not in manifest.part_bytes()
    assert not (tmp_path / "backup" / "data" / "embedding_cache.sqlite").exists()
    assert any("embedding_cache.sqlite" in note and "embeds every chunk again" in note for note in manifest.notes)


def test_the_index_is_copied_under_its_lock_while_a_writer_writes(paths: DataPaths, tmp_path: Path) -> None:
    """A writer opens the folder, writes one document (a parent, then two children) and closes it, again and again;
    each backup taken meanwhile holds whole documents only, and the writer only ever waited for the copy."""
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        i = 100
        while not stop.is_set():
            store = EdgeVectorStore(paths.qdrant, wait_seconds=30)
            try:
                write_documents(store, [_document(f"d{i}")])
            finally:
                store.close()
            written.append(i)
            i += 1
            # Runs come minutes apart; back to back, the writer would take every turn (turns are not fair, and a
            # waiting opener polls up to every 0.5 s).
            time.sleep(0.6)

    thread = threading.Thread(target=write)
    thread.start()
    try:
        backups = []
        while len(backups) < 2:
            if len(written) > len(backups):  # at least one write between two backups
                backups.append(back_up(_sources(paths), tmp_path / f"backup{len(backups)}"))
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join()
    counts = []
    for number, result in enumerate(backups):
        assert result.manifest.index_held_seconds < 5
        restore(result.path, _target(tmp_path / f"restored{number}"))
        counts.append(_counts(tmp_path / f"restored{number}" / "qdrant"))
    for children, parents in counts:
        assert children == 2 * parents and parents >= 4, counts
    assert counts[1][1] > counts[0][1]


def test_a_backup_waits_for_the_opener_holding_the_index(paths: DataPaths, tmp_path: Path) -> None:
    holder = FolderLock(paths.qdrant, "a points step")
    assert holder.try_acquire()
    messages: list[str] = []
    index = EmbeddedIndexBackup(paths.qdrant, wait_seconds=0.3, on_wait=messages.append)
    from rag_pipeline.index.store_lock import StoreBusyError

    with pytest.raises(StoreBusyError, match="a points step"):
        back_up(BackupSources(paths, paths.dagster_home, index), tmp_path / "backup")
    holder.release()
    # The failed attempt left an unfinished folder, which the next backup replaces and a restore refuses.
    assert (tmp_path / f"backup{PARTIAL_SUFFIX}" / UNFINISHED).exists()
    with pytest.raises(BackupRefused, match="unfinished"):
        read_backup(tmp_path / f"backup{PARTIAL_SUFFIX}")
    back_up(BackupSources(paths, paths.dagster_home, index), tmp_path / "backup")
    assert not (tmp_path / f"backup{PARTIAL_SUFFIX}").exists()


def test_a_tampered_or_missing_file_is_named_and_nothing_is_restored(paths: DataPaths, tmp_path: Path) -> None:
    back_up(_sources(paths), tmp_path / "backup")
    tampered = tmp_path / "backup" / "data" / "directory.sqlite"
    content = bytearray(tampered.read_bytes())
    content[200] ^= 0xFF
    tampered.write_bytes(bytes(content))
    with pytest.raises(BackupCorrupt, match=r"data/directory\.sqlite does not match its sha256") as caught:
        restore(tmp_path / "backup", _target(tmp_path / "restored"))
    assert caught.value.path == "data/directory.sqlite"
    assert list((tmp_path / "restored").iterdir()) == []  # the staging folder is gone, nothing was moved in
    with pytest.raises(BackupCorrupt, match=r"data/directory\.sqlite"):
        verify(tmp_path / "backup")

    segment = next((tmp_path / "backup" / "index").rglob("edge_config.json"))
    segment.unlink()
    name = segment.relative_to(tmp_path / "backup").as_posix()
    tampered.write_bytes(bytes(content[:100]))
    with pytest.raises(BackupCorrupt, match="holds 100 bytes"):
        verify(tmp_path / "backup")
    manifest = json.loads((tmp_path / "backup" / MANIFEST).read_text())
    manifest["files"] = [f for f in manifest["files"] if f["path"] != "data/directory.sqlite"]
    (tmp_path / "backup" / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BackupCorrupt, match=re.escape(f"{name} is missing")):
        restore(tmp_path / "backup", _target(tmp_path / "restored"))


def test_a_destination_that_holds_something_is_refused_unless_forced(paths: DataPaths, tmp_path: Path) -> None:
    back_up(_sources(paths), tmp_path / "backup")
    target = tmp_path / "restored"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(BackupRefused, match=r"not empty.*--force"):
        restore(tmp_path / "backup", _target(target))
    result = restore(tmp_path / "backup", _target(target), force=True)
    assert result.replaced == [str(target / "notes.txt")] and not (target / "notes.txt").exists()
    assert _counts(target / "qdrant") == (6, 3)
    # A folder whose index is open (a service, a run) is refused even with --force.
    with pytest.raises(BackupRefused, match="stop the search service"):
        restore(tmp_path / "backup", _target(target, index_holder=lambda: "held by pid 7"), force=True)


def test_backup_destinations_that_overlap_the_folder_or_hold_something_else_are_refused(
    paths: DataPaths, tmp_path: Path
) -> None:
    with pytest.raises(BackupRefused, match="overlaps the data folder"):
        back_up(_sources(paths), paths.root / "backups" / "nightly")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "file").write_text("x")
    with pytest.raises(BackupRefused, match="holds something other than a backup"):
        back_up(_sources(paths), tmp_path / "elsewhere")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(BackupRefused, match="is a file"):
        back_up(_sources(paths), tmp_path / "afile")
    with pytest.raises(BackupRefused, match="not a backup"):
        read_backup(tmp_path / "elsewhere")
    # A second backup into the same destination while one runs.
    fd = os.open(tmp_path / ".nightly.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(BackupRefused, match="another backup"):
            back_up(_sources(paths), tmp_path / "nightly")
    finally:
        os.close(fd)


def test_a_backup_replaces_the_previous_one_only_once_complete(paths: DataPaths, tmp_path: Path) -> None:
    first = back_up(_sources(paths), tmp_path / "nightly")
    second = back_up(_sources(paths), tmp_path / "nightly")
    assert second.replaced_previous and not (tmp_path / f"nightly{REPLACED_SUFFIX}").exists()
    assert read_backup(tmp_path / "nightly").created_at >= first.manifest.created_at
    # Stopped between its two renames: the previous backup waits at DEST.old, and restore says so.
    (tmp_path / "nightly").rename(tmp_path / f"nightly{REPLACED_SUFFIX}")
    with pytest.raises(BackupRefused, match=r"nightly\.old is a complete one"):
        read_backup(tmp_path / "nightly")
    back_up(_sources(paths), tmp_path / "nightly")
    assert not (tmp_path / f"nightly{REPLACED_SUFFIX}").exists()
    verify(tmp_path / "nightly")


# Runs back_up in its own process and stops it, for the test to kill, after it copied a few files of the data folder.
KILLED_BACKUP = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import rag_pipeline.pipeline.backup as backup
    from rag_pipeline.index.backup import EmbeddedIndexBackup
    from rag_pipeline.settings import DataPaths

    root, dest, marker = (Path(a) for a in sys.argv[1:4])
    paths = DataPaths(root=root)
    copy_file, copied = backup.copy_file, []

    def slow_copy(*args, **kwargs):
        copied.append(args[0])
        if len(copied) == 2:
            marker.write_text("copying")
            time.sleep(120)
        return copy_file(*args, **kwargs)

    backup.copy_file = slow_copy
    index = EmbeddedIndexBackup(paths.qdrant, wait_seconds=30)
    backup.back_up(backup.BackupSources(paths, paths.dagster_home, index), dest)
    """
)


def test_a_backup_killed_half_way_leaves_the_previous_one_intact(paths: DataPaths, tmp_path: Path) -> None:
    previous = back_up(_sources(paths), tmp_path / "nightly").manifest
    (paths.parquet / "slack_threads" / "2024-W10.parquet").write_bytes(os.urandom(2000))  # a change since
    marker = tmp_path / "marker"
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_BACKUP, str(paths.root), str(tmp_path / "nightly"), str(marker)], cwd=REPO_ROOT
    )
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert process.poll() is None and time.monotonic() < deadline, "the backup never reached its second file"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()

    partial = tmp_path / f"nightly{PARTIAL_SUFFIX}"
    assert (partial / UNFINISHED).exists() and not (partial / MANIFEST).exists()
    assert verify(tmp_path / "nightly").files == previous.files  # untouched, and still checks out
    with pytest.raises(BackupRefused, match="unfinished backup"):
        restore(partial, _target(tmp_path / "restored"))
    # Renamed, an unfinished folder is still refused (its marker says what it is).
    partial.rename(tmp_path / "renamed")
    with pytest.raises(BackupRefused, match="unfinished backup"):
        read_backup(tmp_path / "renamed")
    # The next backup completes and holds the change.
    latest = back_up(_sources(paths), tmp_path / "nightly").manifest
    assert "data/parquet/slack_threads/2024-W10.parquet" in {f.path for f in latest.files}
