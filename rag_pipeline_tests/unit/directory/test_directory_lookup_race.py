"""The directory lookup's change check never fails a query while the directory is written: SQLite creates and
deletes the ``-wal`` file at checkpoints, and the check used to stat it right after seeing it exist (issue 47: a
FileNotFoundError, an HTTP 500, during a directory refresh)."""

from __future__ import annotations

import threading
from pathlib import Path

from rag_pipeline.directory.lookup import DirectoryLookup, _mtime_ns


def test_a_missing_file_has_time_zero_and_a_present_one_its_own(tmp_path: Path) -> None:
    assert _mtime_ns(tmp_path / "absent") == 0
    present = tmp_path / "present"
    present.write_text("x")
    assert _mtime_ns(present) == present.stat().st_mtime_ns > 0


def test_the_version_check_survives_the_wal_file_coming_and_going(tmp_path: Path) -> None:
    lookup = DirectoryLookup(tmp_path / "directory.sqlite")
    wal = tmp_path / "directory.sqlite-wal"
    stop = threading.Event()

    def churn() -> None:  # a writer's checkpoints, as fast as the file system allows
        while not stop.is_set():
            wal.write_bytes(b"w")
            wal.unlink(missing_ok=True)

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        versions = {lookup._current_version() for _ in range(20_000)}
    finally:
        stop.set()
        writer.join()
    assert versions  # 20,000 checks, none raised
