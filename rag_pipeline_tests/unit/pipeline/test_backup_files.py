"""The file copies a backup is made of: sparse files stay sparse and hash as their whole content, and a SQLite
database copied while another connection commits is one committed state of it."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path

from rag_pipeline.pipeline.backup_files import copy_file, copy_sqlite, hash_file, is_sqlite


def _sparse(path: Path) -> bytes:
    """A 16 MiB file holding 8 KiB of data in two places, the rest holes (as qdrant-edge preallocates)."""
    with path.open("wb") as handle:
        handle.truncate(16 << 20)
        handle.seek(5 << 20)
        handle.write(b"a" * 4096)
        handle.seek((16 << 20) - 4096)
        handle.write(b"z" * 4096)
    return path.read_bytes()


def test_a_sparse_file_is_copied_sparse_and_hashed_whole(tmp_path: Path) -> None:
    content = _sparse(tmp_path / "segment")
    done: list[int] = []
    copied = copy_file(tmp_path / "segment", tmp_path / "copy" / "segment", done.append)
    assert copied.size == len(content) and copied.sha256 == hashlib.sha256(content).hexdigest()
    assert (tmp_path / "copy" / "segment").read_bytes() == content
    # Only the data was written (and counted): the copy takes what the original takes, not 16 MiB.
    assert sum(done) <= 1 << 20
    assert (tmp_path / "copy" / "segment").stat().st_blocks * 512 <= 1 << 20
    assert hash_file(tmp_path / "copy" / "segment") == copied


def test_the_copy_under_the_lock_skips_hash_and_sync_and_the_hash_comes_after(tmp_path: Path) -> None:
    content = _sparse(tmp_path / "segment")
    copied = copy_file(tmp_path / "segment", tmp_path / "copy", digest=False, sync=False)
    assert copied.sha256 == "" and copied.size == len(content)
    assert hash_file(tmp_path / "copy", sync=True).sha256 == hashlib.sha256(content).hexdigest()


def test_plain_and_empty_files(tmp_path: Path) -> None:
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "text").write_text("hello\n")
    assert copy_file(tmp_path / "empty", tmp_path / "c1").sha256 == hashlib.sha256(b"").hexdigest()
    assert copy_file(tmp_path / "text", tmp_path / "c2").sha256 == hashlib.sha256(b"hello\n").hexdigest()
    assert not is_sqlite(tmp_path / "text") and not is_sqlite(tmp_path / "missing")


def test_a_sqlite_database_copied_while_another_connection_commits_is_one_committed_state(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE t (tx INTEGER, half INTEGER)")
    setup.commit()
    setup.close()
    stop = threading.Event()

    def write() -> None:
        # Each transaction writes two rows: a copy holding one row of a transaction without the other is torn.
        writer = sqlite3.connect(path, timeout=30)
        tx = 0
        while not stop.is_set():
            with writer:
                writer.execute("INSERT INTO t VALUES (?, 0)", (tx,))
                writer.execute("INSERT INTO t VALUES (?, 1)", (tx,))
            tx += 1
        writer.close()

    thread = threading.Thread(target=write)
    thread.start()
    try:
        counts = []
        for i in range(5):
            copy = tmp_path / f"copy{i}.sqlite"
            copied = copy_sqlite(path, copy)
            assert is_sqlite(copy) and copied.size == copy.stat().st_size
            assert not Path(f"{copy}-wal").exists()
            check = sqlite3.connect(copy)
            assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            rows, transactions = check.execute("SELECT count(*), count(DISTINCT tx) FROM t").fetchone()
            check.close()
            assert rows == 2 * transactions
            counts.append(rows)
    finally:
        stop.set()
        thread.join()
    assert counts[-1] > 0  # the writer had committed by then: the WAL's commits are in the copy


def test_a_database_in_wal_mode_whose_rows_are_only_in_its_wal_is_copied_whole(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("PRAGMA wal_autocheckpoint=0")  # keep every commit in the -wal file
    holder.execute("CREATE TABLE t (x)")
    holder.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    holder.commit()
    assert os.path.getsize(f"{path}-wal") > 0
    copy_sqlite(path, tmp_path / "copy.sqlite")
    holder.close()
    check = sqlite3.connect(tmp_path / "copy.sqlite")
    assert check.execute("SELECT count(*) FROM t").fetchone() == (100,)
    check.close()
