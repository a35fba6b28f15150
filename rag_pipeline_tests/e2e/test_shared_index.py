"""The search service's shared index in-process, with a stand-in store and real waiting markers: hand-over to
a live waiter, markers of dead waiters ignored, an unusable index reported and never held, stopping cleanly.
The same protocol across real processes is tested in ``test_serving.py``."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rag_pipeline.index.store_lock import StoreBusyError, WaitingMarker, waiting_openers
from rag_pipeline.serving.shared_index import IndexUnavailable, SharedIndex


class FakeStore:
    """Counts opens and closes; ``busy`` makes the next opens fail as a held folder does."""

    opened = 0
    closed = 0

    def __init__(self) -> None:
        FakeStore.opened += 1
        self.is_closed = False

    def close(self) -> None:
        self.is_closed = True
        FakeStore.closed += 1


@pytest.fixture(autouse=True)
def _counts() -> None:
    FakeStore.opened = FakeStore.closed = 0


def _until(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_a_live_waiter_gets_the_folder_and_queries_wait_for_it_to_come_back(tmp_path: Path) -> None:
    shared = SharedIndex(FakeStore, lambda store: store, tmp_path, poll_seconds=0.01)
    shared.start()
    try:
        with shared.reading(1.0) as (first, waited):
            assert not first.is_closed and waited < 0.5
        marker = WaitingMarker(tmp_path, "a writer")
        marker.write()
        _until(lambda: first.is_closed)  # handed over
        assert shared.state() == ("waiting", "the index is being written by a writer")
        results: list[float] = []

        def query() -> None:
            with shared.reading(5.0) as (store, waited):
                assert not store.is_closed
                results.append(waited)

        waiting = threading.Thread(target=query)
        waiting.start()
        time.sleep(0.2)
        assert not results  # still lent out
        marker.remove()  # the writer is done
        waiting.join(5)
        assert len(results) == 1 and 0.15 < results[0] < 2.0
        assert shared.stats.hand_overs == 1 and shared.state()[0] == "open"
    finally:
        shared.close()
    assert FakeStore.opened == FakeStore.closed == 2


def test_the_marker_of_a_killed_waiter_is_removed_and_ignored(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from rag_pipeline.index.store_lock import WaitingMarker\n"
            "WaitingMarker(Path(sys.argv[1]), 'killed writer').write(); print('waiting', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "waiting"
    assert [h.label for h in waiting_openers(tmp_path)] == ["killed writer"]
    child.kill()
    child.wait()
    assert waiting_openers(tmp_path) == []
    assert not list((tmp_path / "store.waiting").iterdir())
    # A marker left behind by anything (no lock held on it) never makes a service hand its index over.
    (tmp_path / "store.waiting" / "1-left-behind").write_text('{"pid": 1, "label": "stale", "since": 0}')
    shared = SharedIndex(FakeStore, lambda store: store, tmp_path, poll_seconds=0.01)
    shared.start()
    try:
        time.sleep(0.2)
        assert shared.state() == ("open", None) and shared.stats.hand_overs == 0
    finally:
        shared.close()


def test_an_index_that_cannot_be_used_is_reported_and_closed_at_once(tmp_path: Path) -> None:
    def reject(store: FakeStore) -> FakeStore:
        raise ValueError("the index was built with dense model 'a' but 'b' is configured (RAG_DENSE_MODEL)")

    shared = SharedIndex(FakeStore, reject, tmp_path, poll_seconds=0.01)
    shared.start()
    try:
        state, reason = shared.state()
        assert state == "unusable" and reason is not None and "RAG_DENSE_MODEL" in reason
        assert FakeStore.opened == FakeStore.closed == 1  # not kept: a writer gets the folder
        with pytest.raises(IndexUnavailable, match="RAG_DENSE_MODEL"), shared.reading(0.05):
            pass
    finally:
        shared.close()


def test_a_folder_held_elsewhere_is_retried_until_it_is_free(tmp_path: Path) -> None:
    attempts = {"n": 0}

    def open_store() -> FakeStore:
        attempts["n"] += 1
        if attempts["n"] < 4:
            raise StoreBusyError(tmp_path, 0.0, None)
        return FakeStore()

    shared = SharedIndex(open_store, lambda store: store, tmp_path, poll_seconds=0.01)
    shared.start()
    try:
        assert shared.state()[0] == "starting"
        with shared.reading(5.0) as (store, waited):
            assert not store.is_closed and waited > 0
        assert attempts["n"] == 4
    finally:
        shared.close()


def test_close_waits_for_the_query_in_flight_and_leaves_nothing_open(tmp_path: Path) -> None:
    shared = SharedIndex(FakeStore, lambda store: store, tmp_path, poll_seconds=0.01)
    shared.start()
    entered, release = threading.Event(), threading.Event()

    def query() -> None:
        with shared.reading(1.0) as (store, _):
            entered.set()
            release.wait(5)
            assert not store.is_closed

    running = threading.Thread(target=query)
    running.start()
    entered.wait(5)
    closer = threading.Thread(target=shared.close)
    closer.start()
    time.sleep(0.1)
    assert closer.is_alive()  # waiting for the query
    release.set()
    running.join(5)
    closer.join(5)
    assert not closer.is_alive() and FakeStore.opened == FakeStore.closed == 1
    with pytest.raises(IndexUnavailable, match="stopping"), shared.reading(0.05):
        pass
