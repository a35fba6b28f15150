"""Retention on the demo folder after ten syncs: what ``rag-pipeline prune`` reclaims, per kind (issue 51, part 7).

    .venv/bin/python -m bench.retention                 # ~4 min on 2 cores
    .venv/bin/python -m bench.retention --syncs 20 --keep /tmp/rag_retention   # more syncs; keep the folder

1. The demo folder: ``rag-pipeline demo --no-eval --json`` (the bundled Slack export and Jira dump, every week
   materialized by one backfill run per source) into a fresh folder, embeddings from the test kit's
   OpenAI-compatible fake (``openai:text-embedding-3-small@256``: no encoder time, as ``bench.pipeline_overhead``).
2. Ten syncs: the same Slack workspace served live by the test kit's Slack API emulator, and the real sync sensor
   on a fake clock at the export's last day (``SyncHarness``: the initial history, 90 days, then a tick an hour
   after a new message), each run on the folder's own Dagster instance (the runners' SQLite instance with one
   event log file per run).
3. Retention a month later: the plan (a dry run) and then the real run for ``now`` = the end of the syncs +
   ``RAG_RETENTION_RUN_DAYS`` + 1 day, with the default settings (runs 30 days, reports 90 days). Nothing else
   changes between the two (that is what "a month later" means here: no sync ran in between, so the last ones
   still hold the watermarks).

Reported: the folder's bytes on disk before and after (in total and per top-level entry), runs before and after, runs
deleted and kept (with the reasons), bytes reclaimed per kind, the seconds the plan and the deletion took, and the
SQLite pages freed inside ``index.db`` and ``runs.db`` (reused by later events, not returned to the disk) with
what a ``VACUUM`` would shrink them to. Results: bench/results/retention.json.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT, parser, run_record, write_json
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY as FAKE_API_KEY

EXPORT = ROOT / "rag_pipeline" / "data" / "slack_ubuntu" / "export"
TEAM, DOMAIN = "T0UBUNTU", "ubuntu.slack.com"  # what the demo records for the bundled export
# The export's last day, 10:00 UTC: the initial history reads its last 90 days, the ticks that day.
CLOCK = datetime(2016, 12, 19, 10, 0, 30, tzinfo=UTC)
CLEARED = ("RAG_", "DAGSTER_", "QDRANT_", "SLACK_", "JIRA_", "OPENAI_")


def _env(data: Path, openai_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    env.update(
        RAG_DATA_DIR=str(data),
        RAG_DENSE_MODEL="openai:text-embedding-3-small@256",
        RAG_LANGUAGE="english",
        OPENAI_BASE_URL=openai_url,
        OPENAI_API_KEY=FAKE_API_KEY,
    )
    return env


def build_demo(data: Path, openai_url: str) -> dict[str, Any]:
    """``rag-pipeline demo --no-eval`` into ``data``, in a process of its own (as a user runs it)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from rag_pipeline.cli import main; sys.exit(main(sys.argv[1:]))",
         "demo", "--no-eval", "--json", "--data-dir", str(data)],
        cwd=ROOT, env=_env(data, openai_url), capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"demo failed ({done.returncode}):\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "runs": summary["runs"],
        "documents": summary["documents"],
    }


def folder_bytes(data: Path) -> dict[str, int]:
    """Bytes on disk (``du``'s count: allocated blocks) of every file under ``data``, per top-level entry, the
    total, and the total of the files' apparent sizes (the embedded index's files are sparse: far larger apparent
    than allocated)."""
    out: dict[str, int] = {}
    apparent = 0
    for entry in sorted(data.iterdir()):
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file() and not p.is_symlink()]
        stats = [p.stat() for p in files]
        out[entry.name] = sum(s.st_blocks * 512 for s in stats)
        apparent += sum(s.st_size for s in stats)
    out["total"] = sum(out.values())
    out["apparent_total"] = apparent
    return out


def sqlite_pages(path: Path) -> dict[str, int]:
    """A database's size, the bytes of its free pages (reused by later writes) and its size after a VACUUM
    (measured with ``VACUUM INTO`` a scratch copy: the database itself is left as it is)."""
    with sqlite3.connect(path) as conn:
        page = conn.execute("pragma page_size").fetchone()[0]
        free = conn.execute("pragma freelist_count").fetchone()[0]
        scratch = Path(tempfile.mkdtemp(prefix="rag-vacuum-")) / "vacuumed.db"
        conn.execute("vacuum into ?", (str(scratch),))
    vacuumed = scratch.stat().st_size
    shutil.rmtree(scratch.parent)
    return {"bytes": path.stat().st_size, "free_bytes": page * free, "after_vacuum_bytes": vacuumed}


def ten_syncs(data: Path, openai_url: str, syncs: int) -> tuple[list[dict[str, Any]], datetime]:
    """``syncs`` scheduled syncs of the bundled workspace, served live, into the demo folder's instance; each
    sync's run id, seconds and success, and the instant the last one ended."""
    import dagster as dg

    from rag_pipeline.runs.execution import runner_instance
    from rag_pipeline.runs.instance import ensure_dagster_home
    from rag_pipeline.settings import Settings
    from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
    from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace
    from rag_pipeline_tests.kit.sync_harness import SyncHarness

    workspace = SlackWorkspace.from_export(EXPORT, TEAM, DOMAIN)
    channel = next(iter(workspace.channels))
    user = workspace.users[0]["id"]
    out = []
    with SlackEmulator(workspace) as emu:  # its token: xoxb-test-token
        env = _env(data, openai_url)
        env.update(SLACK_BOT_TOKEN="xoxb-test-token", SLACK_API_BASE_URL=emu.base_url)
        os.environ.update(env)  # the resources resolve SLACK_BOT_TOKEN (an EnvVar) from the process environment
        settings = Settings.from_env(env)
        ensure_dagster_home(settings)
        with runner_instance() as instance:
            harness = SyncHarness(settings, "slack", instance, now=CLOCK)
            for n in range(syncs):
                harness.now = CLOCK + timedelta(hours=n)
                if n:  # a new message since the last sync, as a live channel has
                    ts = f"{int((harness.now - timedelta(minutes=30)).timestamp())}.000100"
                    workspace.post(channel, {"ts": ts, "user": user, "text": f"retention bench message {n}"})
                started = time.perf_counter()
                results = harness.tick()
                out.append(
                    {
                        "runs": [r.run_id for r in results],
                        "success": all(r.success for r in results),
                        "seconds": round(time.perf_counter() - started, 1),
                    }
                )
                print(f"sync {n + 1}/{syncs}: {out[-1]}", file=sys.stderr)
            ended = max(
                (r.end_time or 0.0)
                for r in instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]))
            )
    return out, datetime.fromtimestamp(ended, UTC)


def prune_a_month_later(data: Path, openai_url: str, after: datetime) -> dict[str, Any]:
    """The retention plan (dry run) and the real run for a month after ``after``, with the default settings."""
    from rag_pipeline.commands.prune import print_plan
    from rag_pipeline.runs.execution import runner_instance
    from rag_pipeline.runs.instance import ensure_dagster_home
    from rag_pipeline.runs.retention import apply_retention, plan_retention
    from rag_pipeline.settings import Settings

    settings = Settings.from_env(_env(data, openai_url))
    now = after + timedelta(days=settings.retention.run_days + 1)
    ensure_dagster_home(settings)
    history = data / "dagster_home" / "history"
    with runner_instance() as instance:
        runs_before = len(instance.get_run_records())
        started = time.perf_counter()
        plan = plan_retention(settings, instance, now)
        plan_seconds = time.perf_counter() - started
        print_plan(plan, None, sys.stderr)
        dry = plan.as_dict()
        untouched = folder_bytes(data)["total"]
        started = time.perf_counter()
        result = apply_retention(plan, instance)
        apply_seconds = time.perf_counter() - started
        print_plan(plan, result, sys.stderr)
        runs_after = len(instance.get_run_records())
    return {
        "now": now.isoformat(timespec="seconds"),
        "run_days": settings.retention.run_days,
        "report_days": settings.retention.report_days,
        "runs_before": runs_before,
        "runs_after": runs_after,
        "dry_run": {
            "kinds": dry["kinds"],
            "bytes": dry["bytes"],
            "runs": [{k: r[k] for k in ("run_id", "job_name", "bytes")} for r in dry["runs"]],
            "kept_runs": [{k: r[k] for k in ("run_id", "job_name", "reason")} for r in dry["kept_runs"]],
            "folder_bytes_after_dry_run": untouched,
            "plan_seconds": round(plan_seconds, 2),
        },
        "result": {**result.as_dict(), "apply_seconds": round(apply_seconds, 2)},
        "sqlite_after": {
            name: sqlite_pages(history / path) for name, path in (("runs.db", "runs.db"), ("index.db", "runs/index.db"))
        },
    }


def main() -> None:
    args = _parser().parse_args()
    from rag_pipeline_tests.kit.emulators.openai_api import OpenAIFake

    work = Path(tempfile.mkdtemp(prefix="rag-retention-"))
    data = args.keep or work / "data"
    if data.exists():
        raise SystemExit(f"{data} exists: give a new folder to --keep")
    try:
        with OpenAIFake() as fake:
            print("building the demo folder (demo --no-eval)", file=sys.stderr)
            demo = build_demo(data, fake.base_url)
            built = folder_bytes(data)
            print(f"{args.syncs} syncs", file=sys.stderr)
            syncs, ended = ten_syncs(data, fake.base_url, args.syncs)
            synced = folder_bytes(data)
            print("retention a month later", file=sys.stderr)
            retention = prune_a_month_later(data, fake.base_url, ended)
            pruned = folder_bytes(data)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = {
        **run_record(),
        "demo": demo,
        "syncs": syncs,
        "folder_bytes": {"after_demo": built, "after_syncs": synced, "after_prune": pruned},
        "retention": retention,
        "reclaimed_bytes": synced["total"] - pruned["total"],
    }
    write_json(args.output, out)
    kinds = {k: v for k, v in retention["result"]["kinds"].items() if v["count"]}
    print(
        json.dumps(
            {
                "folder_bytes_after_syncs": synced["total"],
                "folder_bytes_after_prune": pruned["total"],
                "runs_deleted": retention["result"]["runs_deleted"],
                "bytes_reclaimed": retention["result"]["bytes_reclaimed"],
                "kinds": kinds,
            },
            indent=1,
        )
    )


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--syncs", type=int, default=10, help="scheduled syncs after the demo (default: %(default)s)")
    p.add_argument("--keep", type=Path, help="build the folder here and keep it (default: a temporary folder)")
    p.add_argument("--output", type=Path, default=RESULTS / "retention.json")
    return p


if __name__ == "__main__":
    main()
