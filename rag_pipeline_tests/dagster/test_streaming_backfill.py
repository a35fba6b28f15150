"""A first index in bounded batches (issue 68): how weeks are cut into batches, that batches give the same index as
one whole-history run, that a command killed in the middle resumes at the first unfinished batch, and that a run
holds one batch's documents whatever the history."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from bench.company_scale import DOMAIN, END, SITE, TEAM, Size, build_workspace, write_jira
from rag_pipeline.cli import main
from rag_pipeline.commands.progress import BatchClock
from rag_pipeline.composition import open_index
from rag_pipeline.pipeline.tags import RANGE_END_TAG, RANGE_START_TAG, SOURCE_TAG
from rag_pipeline.runs.backfill import Batch, plan_batches
from rag_pipeline.runs.live_sync import explicit_pieces
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake
from rag_pipeline_tests.kit.paths import REPO_ROOT

# A small company: 4 channels and a Jira project over 120 days (skewed activity, recency-biased days).
SMALL = Size(channels=4, projects=1, days=120, threads=150, issues=30)
RAW_ASSETS = {"slack_threads", "jira_issues"}
QUERIES = ["deploy build release", "database query index", "error timeout retry", "login session token", "alert"]


def test_weeks_are_cut_into_batches_of_at_most_the_budget() -> None:
    weeks = ["2024-01-01", "2024-01-08", "2024-01-15", "2024-01-22", "2024-01-29", "2024-02-05"]
    counts = {"2024-01-08": 3, "2024-01-15": 4, "2024-01-22": 9, "2024-02-05": 2}
    # Empty leading weeks join the first batch, empty trailing ones the last; a week above the budget is alone.
    assert plan_batches(weeks, counts, budget=7) == [
        Batch("2024-01-01", "2024-01-15", 7),
        Batch("2024-01-22", "2024-01-29", 9),
        Batch("2024-02-05", "2024-02-05", 2),
    ]
    assert plan_batches(weeks, counts, budget=100) == [Batch("2024-01-01", "2024-02-05", 18)]
    assert [b.documents for b in plan_batches(weeks, counts, budget=1)] == [3, 4, 9, 2]
    # Every week is in exactly one batch, in order.
    batches = plan_batches(weeks, counts, budget=5)
    covered = [w for b in batches for w in weeks if b.start <= w <= b.end]
    assert covered == weeks and sum(b.documents for b in batches) == sum(counts.values())
    assert plan_batches([], {}, budget=5) == []


def test_an_explicit_sync_range_runs_a_capped_piece_at_a_time() -> None:
    # sync --start/--end: pieces of at most RAG_SYNC_MAX_RANGE_DAYS days, consecutive, covering the range once.
    pieces = explicit_pieces("2024-01-01", "2024-03-05", 30)
    assert pieces == [("2024-01-01", "2024-01-30"), ("2024-01-31", "2024-02-29"), ("2024-03-01", "2024-03-05")]
    assert explicit_pieces("2024-01-01", "2024-01-01", 30) == [("2024-01-01", "2024-01-01")]
    days = ("2024-01-01", "2024-01-02", "2024-01-03")
    assert explicit_pieces(days[0], days[-1], 1) == [(d, d) for d in days]


def test_the_eta_follows_the_batches_this_command_ran() -> None:
    now = [100.0]
    clock = BatchClock(done_at_start=4, clock=lambda: now[0])
    assert clock.eta(4, 10) == ""  # nothing ran here yet: no rate to go by
    now[0] = 130.0
    assert clock.eta(6, 10) == ", ETA 1 min 0 s"  # 15 s per batch, 4 left
    assert clock.eta(10, 10) == ""


@pytest.fixture(scope="module")
def company(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A generated Slack export and Jira dump, and the environment that indexes them with the fake embeddings."""
    root = tmp_path_factory.mktemp("company")
    build_workspace(SMALL).write_export(root / "export")
    write_jira(SMALL, root / "jira.jsonl.gz")
    with OpenAIFake() as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DAGSTER_", "SLACK_", "JIRA_"))}
        env.update(
            RAG_DENSE_MODEL="openai:text-embedding-3-small@64",
            RAG_LANGUAGE="english",
            RAG_PARTITION_START=(END - timedelta(days=SMALL.days - 1)).isoformat(),
            OPENAI_BASE_URL=fake.base_url,
            OPENAI_API_KEY=API_KEY,
            PYTHONPATH=str(REPO_ROOT),
            ROOT=str(root),
        )
        yield env


def _index_argv(env: dict[str, str], data: Path) -> list[str]:
    root = Path(env["ROOT"])
    return ["index", "--slack-export", str(root / "export"), "--jira-dump", str(root / "jira.jsonl.gz"),
            "--slack-team", TEAM, "--slack-domain", DOMAIN, "--jira-site", SITE, "--data-dir", str(data)]  # fmt: skip


def _index(env: dict[str, str], data: Path, batch: int, monkeypatch: pytest.MonkeyPatch, capsys) -> dict[str, Any]:
    """``rag-pipeline index --json`` in this process with batches of ``batch`` documents: its summary."""
    for key in [k for k in os.environ if k.startswith(("RAG_", "DAGSTER_", "SLACK_", "JIRA_"))]:
        monkeypatch.delenv(key)
    for key, value in {**env, "RAG_BACKFILL_BATCH_DOCUMENTS": str(batch)}.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    assert main([*_index_argv(env, data), "--json"]) == 0
    summary: dict[str, Any] = json.loads(capsys.readouterr().out)
    return summary


def _points(data: Path) -> dict[str, set[str]]:
    """Every point id of the index, per collection."""
    settings = Settings.from_env().with_data_dir(data)
    with open_index(settings) as store:
        return {
            name: {str(r.id) for r in store._scroll(name, None, ["document_id"])}  # type: ignore[attr-defined]
            for name in (store.names.children, store.names.parents)
        }


def _searches(data: Path, capsys) -> list[list[str]]:
    """The top-10 document ids of each query (BM25 and hybrid, every document)."""
    found = []
    for query in QUERIES:
        for mode in ("bm25", "hybrid"):
            capsys.readouterr()
            argv = ["search", query, "--mode", mode, "--all-documents", "--json", "--data-dir", str(data)]
            assert main(argv) == 0
            found.append([r["document_id"] for r in json.loads(capsys.readouterr().out)["results"]][:10])
    return found


def _batch_runs(data: Path) -> list[dict[str, str]]:
    """The tags of the index's successful runs, oldest first."""
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(data / "dagster_home"))) as instance:
        records = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]))
        return [dict(r.dagster_run.tags) for r in reversed(records)]


# Two first indexes of 180 documents and ten searches each (~1-2 min on 2 cores).
@pytest.mark.slow
def test_batches_give_the_same_index_as_one_run(
    company: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    whole = _index(company, tmp_path / "whole", 1_000_000, monkeypatch, capsys)
    batched = _index(company, tmp_path / "batched", 25, monkeypatch, capsys)
    assert whole["runs"] == 2  # one run per source
    assert batched["runs"] > 6  # 150 threads in batches of at most 25 (a busy week may be one alone), 30 issues
    for key in ("documents", "parent_chunks", "child_chunks", "points", "partitions"):
        assert batched[key] == whole[key], key
    assert _points(tmp_path / "batched") == _points(tmp_path / "whole")
    assert _searches(tmp_path / "batched", capsys) == _searches(tmp_path / "whole", capsys)
    # Each run covered consecutive weeks: together every week from the first document's through this one, once.
    runs = [t for t in _batch_runs(tmp_path / "batched") if t.get(SOURCE_TAG) == "slack"]
    ranges = [(t[RANGE_START_TAG], t[RANGE_END_TAG]) for t in runs]
    assert ranges == sorted(ranges) and all(a[1] < b[0] for a, b in itertools.pairwise(ranges))


# A first index killed (SIGKILL) after its second batch, then run again (~1-2 min on 2 cores).
@pytest.mark.slow
def test_a_first_index_killed_in_the_middle_resumes_at_the_first_unfinished_batch(
    company: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    data = tmp_path / "data"
    env = {**company, "RAG_BACKFILL_BATCH_DOCUMENTS": "20"}
    command = [sys.executable, "-c", "import sys; from rag_pipeline.cli import main; sys.exit(main(sys.argv[1:]))"]
    process = subprocess.Popen(
        [*command, *_index_argv(env, data)], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    lines: list[str] = []
    killed = threading.Event()

    def watch() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            # "slack: 2/9 batches, ETA 40 s": the progress line after the second batch's run succeeded.
            if line.startswith("slack: 2/") and not killed.is_set():
                os.kill(process.pid, signal.SIGKILL)
                killed.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    process.wait(timeout=600)
    watcher.join(timeout=10)
    assert killed.is_set() and process.returncode == -signal.SIGKILL, "".join(lines[-20:])
    assert any(", ETA " in line for line in lines if line.startswith("slack: ")), lines
    done_before = [t for t in _batch_runs(data) if t.get(SOURCE_TAG) == "slack"]
    assert len(done_before) >= 2  # the kill may land while the third batch runs, or just after it

    resumed = _index(env, data, 20, monkeypatch, capsys)
    slack = resumed["per_source"]["slack"]
    # The batches done before the kill are skipped; the rest (the one cut off included) run now.
    assert slack["runs_skipped"] == len(done_before) and slack["runs"] > 0
    reference = _index(company, tmp_path / "reference", 1_000_000, monkeypatch, capsys)
    # Nothing lost, nothing twice: the same points as one uninterrupted run.
    assert _points(data) == _points(tmp_path / "reference")
    assert reference["points"] == sum(len(ids) for ids in _points(data).values())
    # And a third run has nothing left to do.
    again = _index(env, data, 20, monkeypatch, capsys)
    assert again["runs"] == 0 and again["runs_skipped_unchanged"] == resumed["runs"] + resumed["runs_skipped_unchanged"]


def _peak_rss_mb(env: dict[str, str], data: Path, root: Path) -> float:
    """Peak RSS of ``rag-pipeline index`` in a child process (GNU time's %M where installed, else rusage)."""
    code = (
        "import resource, sys; from rag_pipeline.cli import main; code = main(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *_index_argv({**env, "ROOT": str(root)}, data), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stderr.strip().splitlines()[-1]) / 1024


# Two generated companies, one 4x the other's history, indexed in batches of the same budget (~3 min).
@pytest.mark.slow
def test_a_run_holds_one_batch_whatever_the_history(company: dict[str, str], tmp_path: Path) -> None:
    budget = 100
    env = {**company, "RAG_BACKFILL_BATCH_DOCUMENTS": str(budget)}
    peaks, summaries = {}, {}
    for name, size in (("short", Size(6, 1, 90, 300, 30)), ("long", Size(6, 1, 360, 1_200, 120))):
        root = tmp_path / name
        build_workspace(size).write_export(root / "export")
        write_jira(size, root / "jira.jsonl.gz")
        env["RAG_PARTITION_START"] = (END - timedelta(days=size.days - 1)).isoformat()
        peaks[name] = _peak_rss_mb(env, root / "data", root)
        summaries[name] = _batch_runs(root / "data")
    # Every run's raw step read at most the budget, or one week that alone holds more.
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path / "long" / "data" / "dagster_home"))) as inst:
        for record in inst.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS])):
            events = inst.all_logs(record.dagster_run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            raw = [
                m for e in events if (m := e.asset_materialization) is not None and m.asset_key.path[-1] in RAW_ASSETS
            ]
            documents = int(str(raw[0].metadata["documents"].value))  # the run's count, on each week's event
            assert documents <= budget or len(raw) == 1, (record.dagster_run.tags, documents, len(raw))
    # More history, more batches (not exactly 4x: the recency bias fills the last year's weeks more).
    assert len(summaries["long"]) >= 2 * len(summaries["short"]), (len(summaries["long"]), len(summaries["short"]))
    # Loosely: 4x the history, the same batch budget, at most a quarter more memory (the engine and the source
    # file's read still grow with the history: docs/notes/company_scale.md).
    assert peaks["long"] <= 1.25 * peaks["short"], peaks
