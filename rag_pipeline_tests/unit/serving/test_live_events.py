"""Targeted syncs from pushed changes (serving/live_events.py) through the real ingestion launcher, whose child
command is a stand-in that records its command line: a burst in one container is one job, events arriving while a
job runs fold into exactly one next job, the queue is capped (the rest left to the scheduled sync), a directory
change alone runs the directory command, and the run tags name the events."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.serving.live_events import EVENT_CONTAINERS_TAG, EVENTS_TAG, TRIGGER_TAG, TargetedSyncs
from rag_pipeline.sources.pushed import SeenDeliveries, SyncTarget

# The child: record argv, wait while a "hold" file exists, print an empty summary.
CHILD = (
    "import json, os, sys, time\n"
    "root = os.environ['PUSH_TEST_ROOT']\n"
    "open(os.path.join(root, 'calls.jsonl'), 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    "while os.path.exists(os.path.join(root, 'hold')): time.sleep(0.05)\n"
    "print('{}')\n"
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PUSH_TEST_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture
def launcher(root: Path) -> IngestLauncher:
    return IngestLauncher(root / "data", ["slack", "jira"], command=[sys.executable, "-c", CHILD])


@pytest.fixture
def syncs(launcher: IngestLauncher) -> Iterator[TargetedSyncs]:
    queue = TargetedSyncs(launcher, debounce_seconds=0.3, max_wait_seconds=5.0, max_pending=3)
    yield queue
    queue.stop()


def _calls(root: Path) -> list[list[str]]:
    path = root / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _settled(launcher: IngestLauncher, syncs: TargetedSyncs, jobs: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished = [j for j in launcher.jobs() if j.state in ("succeeded", "failed")]
        if len(finished) >= jobs and not syncs.pending():
            return
        time.sleep(0.05)
    raise AssertionError(f"expected {jobs} finished job(s): {[j.as_dict() for j in launcher.jobs()]}")


def _tags(call: list[str]) -> dict[str, str]:
    return dict(call[i + 1].split("=", 1) for i, a in enumerate(call) if a == "--run-tag")


def test_a_burst_in_one_channel_is_one_targeted_sync(
    root: Path, launcher: IngestLauncher, syncs: TargetedSyncs
) -> None:
    outcomes = [syncs.add("slack", SyncTarget("C0BURST01", "message"), f"Ev{i:04d}") for i in range(100)]
    assert outcomes[0] == "queued" and set(outcomes[1:]) == {"coalesced"}
    _settled(launcher, syncs, jobs=1)
    (call,) = _calls(root)
    assert call[:5] == ["sync", "--source", "slack", "--channel", "C0BURST01"] and "--readable-only" in call
    tags = _tags(call)
    assert tags[TRIGGER_TAG] == "events" and tags[EVENTS_TAG] == "message x100"
    assert tags[EVENT_CONTAINERS_TAG] == "C0BURST01" and tags["rag/event_ids"].endswith("(+80)")
    (job,) = syncs.started
    assert job.events == 100 and job.containers == ["C0BURST01"] and launcher.jobs()[0].run_tags == tags


def test_events_during_a_run_fold_into_one_next_run(
    root: Path, launcher: IngestLauncher, syncs: TargetedSyncs
) -> None:
    (root / "hold").write_text("")
    syncs.add("slack", SyncTarget("C0FIRST01", "message"), "Ev1")
    deadline = time.monotonic() + 30
    while not _calls(root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_calls(root)) == 1  # the first job runs (held)
    for i in range(30):  # a flood while it runs: waits, never a second job beside it
        syncs.add("slack", SyncTarget(f"C0FLOOD0{i % 2}", "message"), f"Ev{i + 2}")
    time.sleep(1.0)
    assert len(_calls(root)) == 1 and sum(syncs.pending().values()) == 30
    (root / "hold").unlink()
    _settled(launcher, syncs, jobs=2)
    first, second = _calls(root)
    assert first[:5] == ["sync", "--source", "slack", "--channel", "C0FIRST01"]
    assert second.count("--channel") == 2 and {"C0FLOOD00", "C0FLOOD01"} <= set(second)
    assert _tags(second)[EVENTS_TAG] == "message x30"


def test_the_queue_is_capped_and_the_rest_left_to_the_schedule(
    root: Path, launcher: IngestLauncher, syncs: TargetedSyncs
) -> None:
    outcomes = [syncs.add("jira", SyncTarget(f"P{i}", "jira:issue_updated"), f"d{i}") for i in range(5)]
    assert outcomes == ["queued"] * 3 + ["dropped"] * 2 and syncs.dropped == 2
    _settled(launcher, syncs, jobs=1)
    (call,) = _calls(root)
    assert call.count("--project") == 3 and "P3" not in call and "P4" not in call


def test_content_only_events_leave_the_directory_to_the_schedule(
    root: Path, launcher: IngestLauncher, syncs: TargetedSyncs
) -> None:
    for i in range(3):
        syncs.add("slack", SyncTarget("C0POSTS01", "message", touches_directory=False), f"Ev{i}")
    _settled(launcher, syncs, jobs=1)
    syncs.add("slack", SyncTarget("C0POSTS01", "message", touches_directory=False), "Ev7")
    syncs.add("slack", SyncTarget("C0JOINS01", "member_joined_channel"), "Ev8")  # rides along: the job refreshes it
    _settled(launcher, syncs, jobs=2)
    posts, with_join = _calls(root)
    assert posts[:5] == ["sync", "--source", "slack", "--channel", "C0POSTS01"] and "--no-directory" in posts
    assert {"C0POSTS01", "C0JOINS01"} <= set(with_join) and "--no-directory" not in with_join


def test_new_messages_alone_skip_the_reconciliation(root: Path, launcher: IngestLauncher, syncs: TargetedSyncs) -> None:
    posted = SyncTarget("C0POSTS01", "message", touches_directory=False, adds_only=True)
    syncs.add("slack", posted, "Ev1")
    _settled(launcher, syncs, jobs=1)
    syncs.add("slack", posted, "Ev2")
    syncs.add("slack", SyncTarget("C0POSTS01", "message_deleted", touches_directory=False), "Ev3")
    _settled(launcher, syncs, jobs=2)
    posts, with_delete = _calls(root)
    assert "--no-reconcile" in posts and "--no-directory" in posts
    assert "--no-reconcile" not in with_delete and "--no-directory" in with_delete


def test_a_directory_change_alone_refreshes_the_directory(
    root: Path, launcher: IngestLauncher, syncs: TargetedSyncs
) -> None:
    syncs.add("slack", SyncTarget(None, "user_change"), "Ev9")
    assert syncs.add("confluence", SyncTarget("ENG", "page_updated"), "x") == "ignored"  # no live API here
    _settled(launcher, syncs, jobs=1)
    (call,) = _calls(root)
    assert call[:3] == ["directory", "--source", "slack"] and "--channel" not in call


def test_seen_deliveries_are_bounded() -> None:
    seen = SeenDeliveries(limit=3)
    assert all(seen.first_time(d) for d in "abc") and not seen.first_time("a")
    assert seen.first_time("d") and len(seen) == 3 and seen.first_time("a")  # "a" was forgotten first
