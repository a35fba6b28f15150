"""The pipeline's own cost at company size (issue 46): a generated Slack workspace and Jira dump of a company's
shape, indexed through every asset, then one scheduled sync tick after a small change.

    .venv/bin/python -m bench.company_scale                          # the steps s, m and l (500 channels)
    .venv/bin/python -m bench.company_scale --size s --size m        # some steps only
    .venv/bin/python -m bench.company_scale --ref b68f1af --size s   # the same step with an earlier revision too
    nohup .venv/bin/python -m bench.company_scale --size xl --no-ui --no-tick > xl.log 2>&1 &   # 250,000 documents

Sizes (channels / Jira projects / days of history / threads / issues): s 20/2/365/2,000/200,
m 100/5/730/10,000/1,000, l 500/20/1,095/50,000/5,000, xl 1,000/40/1,460/227,000/23,000 (250,000 documents: issue
68's streaming first index; about an hour on 2 cores, so run it with --no-ui --no-tick in the background; not in
the default steps). Activity is skewed (channel i gets a share proportional to
1/(i+1)), threads have 0-6 replies within hours, a thread's day is drawn with a recency bias. Embeddings come from
the test kit's OpenAI-compatible fake (``openai:text-embedding-3-small@256``), so the figures are the pipeline's
own work, not the encoder's.

Per size: ``rag-pipeline index`` of the export and dump into a fresh folder (wall seconds, the command's seconds,
the sum of its stage seconds and the overhead = command - stages, runs (one per batch of
RAG_BACKFILL_BATCH_DOCUMENTS documents), partitions, peak RSS through GNU time, seconds per thousand documents, the
load average before and after: the machine is shared),
the materialization events and runs it wrote, the event log's and the parquet files' size and count,
``rag-pipeline status`` seconds, the Dagster UI's partition data for ``slack_threads`` (the GraphQL query the
asset's partition page makes, timed against a running ``dagster-webserver``, and a headless-Chromium screenshot
where Chromium is installed: test-artifacts/company_scale_<size>_partitions.png), and one scheduled tick: the
workspace served by the Slack API emulator, the real sync sensor on a fake clock (initial history first), then
one new message in 10 channels and the next cron tick (runs requested, seconds, API calls).
Results: bench/results/company_scale.json (merged per size and revision).
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import os
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT, parser, read_json, run_record, write_json
from rag_pipeline.settings import DEFAULT_BACKFILL_BATCH_DOCUMENTS
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY as FAKE_API_KEY

TEAM, DOMAIN, SITE = "T0SCALE", "scale.slack.com", "jira.scale.test"
END = date(2026, 11, 20)  # a fixed last day: the generated data is the same whenever it runs
WORDS = [
    "deploy",
    "build",
    "release",
    "pipeline",
    "cluster",
    "node",
    "pod",
    "service",
    "database",
    "query",
    "index",
    "cache",
    "latency",
    "error",
    "timeout",
    "retry",
    "queue",
    "worker",
    "schedule",
    "backup",
    "restore",
    "migration",
    "schema",
    "table",
    "column",
    "api",
    "gateway",
    "token",
    "auth",
    "login",
    "session",
    "user",
    "report",
    "dashboard",
    "metric",
    "alert",
    "incident",
    "outage",
    "postmortem",
    "rollback",
    "config",
    "flag",
    "feature",
    "test",
    "review",
    "merge",
    "branch",
]


@dataclass(frozen=True)
class Size:
    channels: int
    projects: int
    days: int
    threads: int
    issues: int


SIZES = {
    "s": Size(20, 2, 365, 2_000, 200),
    "m": Size(100, 5, 730, 10_000, 1_000),
    "l": Size(500, 20, 1_095, 50_000, 5_000),
    "xl": Size(1_000, 40, 1_460, 227_000, 23_000),
}


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


@functools.cache
def _cumulative_weights(n: int) -> list[float]:
    """The running sums of 1/(i+1), once per n (what ``choices(weights=...)`` computes on every call: the xl
    size draws 250,000 times from 1,000 channels)."""
    return list(itertools.accumulate(1 / (i + 1) for i in range(n)))


def _skewed(rng: random.Random, n: int) -> int:
    """An index in 0..n-1 with weight 1/(i+1): a few busy channels, a long tail of quiet ones (the same draws as
    ``rng.choices(range(n), weights=...)``)."""
    return rng.choices(range(n), cum_weights=_cumulative_weights(n))[0]


def build_workspace(size: Size, seed: int = 46) -> Any:
    """The company's Slack as the emulator's workspace (also written as an export)."""
    from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace

    rng = random.Random(seed)
    ws = SlackWorkspace(team_id=TEAM, domain=DOMAIN, team_name="Scale")
    users = [f"U{n:08d}" for n in range(200)]
    ws.users = [
        {"id": u, "team_id": TEAM, "name": f"user{n}", "real_name": f"User {n}", "deleted": False, "is_bot": False,
         "profile": {"display_name": f"user{n}", "real_name": f"User {n}"}}
        for n, u in enumerate(users)
    ]  # fmt: skip
    first = END - timedelta(days=size.days - 1)
    created = int(datetime.combine(first, datetime.min.time(), UTC).timestamp()) - 86400
    channels = [f"C{n:08d}" for n in range(size.channels)]
    for n, channel in enumerate(channels):
        ws.add_channel(channel, f"team-{n}", members=users[:50], created=created, is_private=n % 10 == 9)
    used: set[tuple[str, int]] = set()
    for _ in range(size.threads):
        channel = channels[_skewed(rng, size.channels)]
        day = first + timedelta(days=min(size.days - 1, int(size.days * rng.random() ** 0.7)))
        start = int(datetime.combine(day, datetime.min.time(), UTC).timestamp()) + rng.randrange(0, 80_000)
        while (channel, start) in used:
            start += 1
        used.add((channel, start))
        root = f"{start}.000100"
        ws.post(channel, {"ts": root, "user": rng.choice(users), "text": _text(rng, rng.randint(8, 40))})
        for r in range(rng.randint(0, 6)):
            reply = start + 60 * (r + 1) + rng.randrange(0, 50)
            while (channel, reply) in used:
                reply += 1
            used.add((channel, reply))
            ws.post(
                channel,
                {"ts": f"{reply}.000200", "user": rng.choice(users), "text": _text(rng, rng.randint(3, 25)),
                 "thread_ts": root},
            )  # fmt: skip
    return ws


def write_jira(size: Size, path: Path, seed: int = 46) -> Path:
    rng = random.Random(seed + 1)
    first = END - timedelta(days=size.days - 1)
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for n in range(size.issues):
            project = f"P{_skewed(rng, size.projects):03d}"
            day = first + timedelta(days=min(size.days - 1, int(size.days * rng.random() ** 0.7)))
            stamp = f"{day.isoformat()}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00.000+0000"
            issue = {
                "id": str(10_000 + n),
                "key": f"{project}-{n + 1}",
                "self": f"https://{SITE}/rest/api/2/issue/{10_000 + n}",
                "fields": {
                    "project": {"key": project, "name": f"Project {project}"},
                    "summary": _text(rng, 6),
                    "description": _text(rng, rng.randint(20, 120)),
                    "created": stamp,
                    "updated": stamp,
                    "status": {"name": "Open"},
                    "issuetype": {"name": "Task"},
                    "reporter": {"displayName": "Reporter"},
                    "comment": {"comments": []},
                },
            }
            out.write(json.dumps(issue) + "\n")
    return path


def _env(data: Path, openai_url: str, package_root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DAGSTER_", "QDRANT_", "SLACK_", "JIRA_"))}
    env.update(
        PYTHONPATH=str(package_root),
        RAG_DATA_DIR=str(data),
        RAG_DENSE_MODEL="openai:text-embedding-3-small@256",
        RAG_LANGUAGE="english",
        OPENAI_BASE_URL=openai_url,
        OPENAI_API_KEY=FAKE_API_KEY,
    )
    return env


def first_index(size: Size, work: Path, openai_url: str, package_root: Path) -> dict[str, Any]:
    data = work / "data"
    env = _env(data, openai_url, package_root)
    env["RAG_PARTITION_START"] = (END - timedelta(days=size.days - 1)).isoformat()
    rss = work / "peak_rss_kb"
    command = [
        "/usr/bin/time", "-f", "%M", "-o", str(rss), sys.executable, "-c",
        "import sys; from rag_pipeline.cli import main; sys.exit(main(sys.argv[1:]))",
        "index", "--slack-export", str(work / "export"), "--jira-dump", str(work / "jira.jsonl.gz"),
        "--slack-team", TEAM, "--slack-domain", DOMAIN, "--jira-site", SITE, "--data-dir", str(data), "--json",
    ]  # fmt: skip
    load_before = os.getloadavg()
    started = time.perf_counter()
    done = _run_watched(command, work, env, data, started)
    wall = time.perf_counter() - started
    load_after = os.getloadavg()
    if done.returncode != 0:
        raise SystemExit(f"index failed ({done.returncode}):\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    stages = sum(sum(float(s) for s in per["stage_seconds"].values()) for per in summary["per_source"].values())
    status_started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import sys; from rag_pipeline.cli import main; sys.exit(main(sys.argv[1:]))",
         "status", "--data-dir", str(data), "--json"],
        cwd=work, env=env, capture_output=True, text=True,
    )  # fmt: skip
    status_seconds = time.perf_counter() - status_started
    return {
        "documents": summary["documents"],
        "wall_seconds": round(wall, 1),
        "command_seconds": summary["seconds"],
        "stage_seconds": round(stages, 1),
        "overhead_seconds": round(summary["seconds"] - stages, 1),
        "runs": summary["runs"],
        "partitions": summary["partitions"],
        "child_chunks": summary["child_chunks"],
        "embeddings_computed": summary["embeddings_computed"],
        "points": summary["points"],
        "peak_rss_mb": round(int(rss.read_text().split()[-1]) / 1024),
        "seconds_per_1000_documents": round(summary["seconds"] / max(1, summary["documents"]) * 1000, 2),
        "batch_documents": int(env.get("RAG_BACKFILL_BATCH_DOCUMENTS") or DEFAULT_BACKFILL_BATCH_DOCUMENTS),
        # The machine is shared: the 1/5/15-minute load averages when the index started and ended.
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in load_after]},
        **storage_figures(data),
        "status_seconds": round(status_seconds, 2),
    }


def _run_watched(
    command: list[str], work: Path, env: dict[str, str], data: Path, started: float
) -> subprocess.CompletedProcess[str]:
    """``command`` to its end, writing ``work/progress.jsonl`` every 30 s (an xl index runs for hours on a shared
    machine: a line a person can read while it runs, and what is known if it is stopped): seconds, batch runs
    succeeded, the process's peak and current RSS, the load average."""
    with (
        open(work / "stdout", "w+") as out,
        open(work / "stderr", "w+") as err,
        open(work / "progress.jsonl", "a") as log,
    ):
        process = subprocess.Popen(command, cwd=work, env=env, stdout=out, stderr=err, text=True)
        while process.poll() is None:
            time.sleep(2)
            if int(time.perf_counter() - started) % 30 < 2:
                log.write(json.dumps(_progress(process.pid, data, started)) + "\n")
                log.flush()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(command, process.returncode, out.read(), err.read())


def _progress(pid: int, data: Path, started: float) -> dict[str, Any]:
    """One progress line of a running index (see :func:`_run_watched`)."""
    memory: dict[str, int] = {}
    try:
        for process in [pid, *_children(pid)]:
            for line in Path(f"/proc/{process}/status").read_text().splitlines():
                # RssFile: pages of mapped files (the index's, the libraries'), which the kernel can drop.
                if line.startswith(("VmHWM", "VmRSS", "RssAnon", "RssFile")):
                    key = line.split(":")[0]
                    memory[key] = max(memory.get(key, 0), int(line.split()[1]) // 1024)
    except OSError:
        pass
    runs = 0
    try:
        with sqlite3.connect(f"file:{data / 'dagster_home' / 'history' / 'runs.db'}?mode=ro", uri=True) as conn:
            runs = conn.execute("select count(*) from runs where status = 'SUCCESS'").fetchone()[0]
    except sqlite3.Error:
        pass
    return {
        "seconds": round(time.perf_counter() - started),
        "runs_succeeded": runs,
        "peak_rss_mb": memory.get("VmHWM"),
        "rss_mb": memory.get("VmRSS"),
        "rss_anonymous_mb": memory.get("RssAnon"),
        "rss_file_mb": memory.get("RssFile"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _children(pid: int) -> list[int]:
    """The process ids ``pid`` started (GNU time's child: the index itself)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def storage_figures(data: Path) -> dict[str, Any]:
    """Materialization events and runs in the instance, event log and parquet sizes and file counts."""
    history = data / "dagster_home" / "history"
    events = 0
    for db in (history / "runs").glob("*.db"):
        if db.name == "index.db":
            continue  # the index shard repeats each asset event of the run shards
        with sqlite3.connect(db) as conn:
            events += conn.execute(
                "select count(*) from event_logs where dagster_event_type = 'ASSET_MATERIALIZATION'"
            ).fetchone()[0]
    with sqlite3.connect(history / "runs.db") as conn:
        runs = conn.execute("select count(*) from runs").fetchone()[0]
    parquet = [p for p in (data / "parquet").rglob("*") if p.is_file()]
    return {
        "materialization_events": events,
        "runs_in_instance": runs,
        "event_log_mb": round(sum(p.stat().st_size for p in history.rglob("*") if p.is_file()) / 2**20, 1),
        "parquet_files": len(parquet),
        "parquet_mb": round(sum(p.stat().st_size for p in parquet) / 2**20, 1),
        # What the operator's disk holds (du: the engine preallocates sparse files): index, cache, everything.
        "disk_mb": {name: _du_mb(data / name) for name in DISK_PARTS} | {"total": _du_mb(data)},
    }


DISK_PARTS = ("qdrant", "parquet", "embedding_cache.sqlite", "dagster_home")


def _du_mb(path: Path) -> float:
    """The blocks ``path`` uses on disk, in MiB (``du``; 0 where it does not exist)."""
    if not path.exists():
        return 0.0
    done = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True)
    return round(int(done.stdout.split()[0]) / 1024, 1) if done.returncode == 0 else 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PARTITIONS_QUERY = """
query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
  partitionStats { numMaterialized numPartitions numFailed numMaterializing }
  assetPartitionStatuses { ... on TimePartitionStatuses { ranges { status startKey endKey } } }
} } }"""


def ui_partition_page(work: Path, openai_url: str, package_root: Path, size_name: str) -> dict[str, Any]:
    """The partition data the UI's partition page asks for, timed through a real dagster-webserver."""
    env = _env(work / "data", openai_url, package_root)
    env["RAG_SLACK_EXPORT"], env["RAG_JIRA_DUMP"] = str(work / "export"), str(work / "jira.jsonl.gz")
    env["SLACK_TEAM_ID"], env["SLACK_DOMAIN"], env["JIRA_SITE"] = TEAM, DOMAIN, SITE
    env["DAGSTER_HOME"] = str(work / "data" / "dagster_home")
    env["RAG_PARTITION_START"] = (END - timedelta(days=SIZES[size_name].days - 1)).isoformat()
    port = _free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-webserver"), "-w", str(ROOT / "workspace.yaml"),
         "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{base}/server_info", timeout=2).read()
                break
            except OSError:
                time.sleep(1)
        body = json.dumps({"query": PARTITIONS_QUERY, "variables": {"key": {"path": ["slack_threads"]}}}).encode()
        timings, answer = [], {}
        for _ in range(3):  # the first query also loads the code location
            started = time.perf_counter()
            request = urllib.request.Request(f"{base}/graphql", body, {"Content-Type": "application/json"})
            answer = json.loads(urllib.request.urlopen(request, timeout=300).read())
            timings.append(round(time.perf_counter() - started, 2))
        node = answer.get("data", {}).get("assetNodeOrError") or {}
        out: dict[str, Any] = {"graphql_seconds": timings, "partition_stats": node.get("partitionStats")}
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium:
            shot = ROOT / "test-artifacts" / f"company_scale_{size_name}_partitions.png"
            shot.parent.mkdir(exist_ok=True)
            started = time.perf_counter()
            subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                 "--virtual-time-budget=15000", f"--screenshot={shot}", f"{base}/assets/slack_threads?view=partitions"],
                capture_output=True, timeout=180,
            )  # fmt: skip
            out["screenshot"] = str(shot.relative_to(ROOT)) if shot.exists() else None
            out["screenshot_seconds"] = round(time.perf_counter() - started, 1)
        else:
            out["screenshot"] = "chromium not installed (make browser)"
        return out
    finally:
        server.terminate()
        server.wait(timeout=30)


def one_tick(size: Size, work: Path) -> dict[str, Any]:
    """The real sync sensor on a fake clock against the emulated workspace: initial history (3 days), then one
    new message in 10 channels and the next hourly tick."""
    import dagster as dg

    from rag_pipeline.settings import Settings
    from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
    from rag_pipeline_tests.kit.sync_harness import SyncHarness

    ws = build_workspace(size)
    now = datetime.combine(END, datetime.min.time(), UTC) + timedelta(hours=10, seconds=30)
    with SlackEmulator(ws) as emu, dg.DagsterInstance.ephemeral() as instance:
        env = {
            "SLACK_BOT_TOKEN": "xoxb-test-token",
            "SLACK_API_BASE_URL": emu.base_url,
            "SLACK_INITIAL_HISTORY_DAYS": "3",
            "SLACK_REQUESTS_PER_MINUTE": "100000",  # the emulator has no limits: measure one whole tick
            "RAG_DATA_DIR": str(work / "live"),
            "RAG_LANGUAGE": "english",
            "RAG_DENSE_MODEL": "openai:text-embedding-3-small@256",
            "OPENAI_BASE_URL": os.environ["OPENAI_BASE_URL"],
            "OPENAI_API_KEY": FAKE_API_KEY,
        }
        os.environ.update(env)  # the resources resolve SLACK_BOT_TOKEN (an EnvVar) from the process environment
        harness = SyncHarness(Settings.from_env(env), "slack", instance, now=now)
        harness.discover()
        started = time.perf_counter()
        first = harness.plan()
        harness.execute(first)
        initial = {"runs": len(first), "seconds": round(time.perf_counter() - started, 1)}
        channels = sorted(ws.channels)[:: max(1, len(ws.channels) // 10)][:10]
        base = int(now.timestamp()) + 60
        for n, channel in enumerate(channels):
            ws.post(channel, {"ts": f"{base + n}.000300", "user": "U00000001", "text": "new message after the sync"})
        calls_before = len(emu.requests)
        harness.now = now + timedelta(hours=1)
        started = time.perf_counter()
        requests = harness.plan()
        planned = time.perf_counter() - started
        results = harness.execute(requests)
        return {
            "initial_history": initial,
            "changed_channels": len(channels),
            "runs": len(requests),
            "runs_succeeded": sum(r.success for r in results),
            "plan_seconds": round(planned, 2),
            "seconds": round(time.perf_counter() - started, 1),
            "api_calls": len(emu.requests) - calls_before,
        }


def main() -> None:
    args = _parser().parse_args()
    from rag_pipeline_tests.kit.emulators.openai_api import OpenAIFake

    sizes = [] if args.encoder_only else args.size or ["s", "m", "l"]
    out_file: Path = args.output
    results: dict[str, Any] = read_json(out_file) if out_file.exists() else {}
    results.update(run_record())
    arms = {"working tree": ROOT}
    work_root = Path(tempfile.mkdtemp(prefix="rag-company-"))
    if args.ref:
        ref_root = work_root / "ref"
        subprocess.run(["git", "worktree", "add", "--detach", "-f", str(ref_root), args.ref], cwd=ROOT, check=True,
                       capture_output=True)  # fmt: skip
        arms = {args.ref: ref_root, "working tree": ROOT}
    if args.encoder or args.encoder_only:
        print("encoder: the bundled CPU model on generated chunks", file=sys.stderr)
        results["encoder"] = encoder_throughput()
        print(json.dumps(results["encoder"], indent=1), file=sys.stderr)
        _project(results)
        write_json(out_file, results)
    try:
        with OpenAIFake() as fake:
            os.environ["OPENAI_BASE_URL"] = fake.base_url
            for name in sizes:
                size = SIZES[name]
                work = work_root / name
                work.mkdir()
                print(f"{name}: generating {size}", file=sys.stderr)
                build_workspace(size).write_export(work / "export")
                write_jira(size, work / "jira.jsonl.gz")
                for arm, package_root in arms.items():
                    if (work / "data").exists():
                        shutil.rmtree(work / "data")
                    print(f"{name} [{arm}]: first index", file=sys.stderr)
                    figures: dict[str, Any] = {
                        # Each size's row keeps its own date and revision: a run of some sizes leaves the others'.
                        "recorded": {"date": results["date"], "commit": _head_commit()},
                        "size": vars(size),
                        "first_index": first_index(size, work, fake.base_url, package_root),
                    }
                    if arm == "working tree" and not args.no_ui:
                        print(f"{name}: UI partition page", file=sys.stderr)
                        figures["ui"] = ui_partition_page(work, fake.base_url, package_root, name)
                        if not args.no_tick:
                            print(f"{name}: one scheduled tick", file=sys.stderr)
                            figures["tick"] = one_tick(size, work)
                    results.setdefault("sizes", {}).setdefault(name, {})[arm] = figures
                    print(json.dumps({name: {arm: figures}}, indent=1), file=sys.stderr)
                    _project(results)
                    write_json(out_file, results)
    finally:
        if args.ref:
            subprocess.run(["git", "worktree", "remove", "--force", str(work_root / "ref")], cwd=ROOT,
                           capture_output=True)  # fmt: skip
        shutil.rmtree(work_root, ignore_errors=True)


def encoder_throughput(texts: int = 400, seed: int = 46) -> dict[str, Any]:
    """The bundled CPU encoder (the default english model on its default backend) on child chunks shaped like the
    generated company's (a thread's messages), as the dense step embeds them: CPU ms per chunk (every thread of
    the process, steadier than wall time on a shared machine), chunks per second per core, wall ms per chunk."""
    from bench.common import cpu_and_wall_ms
    from rag_pipeline.composition import dense_encoder_of
    from rag_pipeline.machine import machine
    from rag_pipeline.settings import Settings

    rng = random.Random(seed)
    chunks = [
        "\n".join(_text(rng, rng.randint(8, 40) if i == 0 else rng.randint(3, 25)) for i in range(rng.randint(1, 7)))
        for _ in range(texts)
    ]
    encoder = dense_encoder_of(Settings.from_env({"RAG_LANGUAGE": "english"}))
    encoder.encode_documents(chunks[:16])  # the first call's allocations are not the steady state
    _, cpu_ms, wall_ms = cpu_and_wall_ms(encoder.encode_documents, chunks)
    return {
        "model": encoder.model_id,
        "machine": machine(encoder),
        "chunks": texts,
        "cpu_ms_per_chunk": round(cpu_ms, 2),
        "chunks_per_second_per_core": round(1000 / cpu_ms, 1),
        "wall_ms_per_chunk": round(wall_ms, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def projected_first_index(figures: dict[str, Any], encoder: dict[str, Any], cores: int) -> dict[str, float]:
    """A size's first index on this machine with the bundled CPU encoder: the pipeline's own seconds (measured
    with the fake embeddings) plus its embeddings at the measured CPU cost spread over ``cores``."""
    embedding = figures["embeddings_computed"] * encoder["cpu_ms_per_chunk"] / 1000 / cores
    return {
        "pipeline_seconds": figures["command_seconds"],
        "embedding_seconds": round(embedding),
        "total_hours": round((figures["command_seconds"] + embedding) / 3600, 2),
    }


def _project(results: dict[str, Any]) -> None:
    """Each measured size's projected first-index time with the CPU encoder, where both are known."""
    encoder = results.get("encoder")
    if not encoder:
        return
    cores = int(encoder["machine"].get("cores") or os.cpu_count() or 1)
    for arms in results.get("sizes", {}).values():
        figures = arms.get("working tree", {}).get("first_index", {})
        if "embeddings_computed" in figures:
            arms["working tree"]["projected_cpu_first_index"] = projected_first_index(figures, encoder, cores)


def _head_commit() -> str:
    """The checkout's commit (with ``+changes`` when the working tree differs from it)."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "rag_pipeline", "bench"], cwd=ROOT)
    return head.stdout.strip() + ("+changes" if dirty.returncode else "")


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--size", action="append", choices=list(SIZES), help="a step to run (repeatable; default: all)")
    p.add_argument("--ref", help="also run the first index with this git revision (A/B)")
    p.add_argument("--no-tick", action="store_true", help="skip the scheduled-tick measurement")
    p.add_argument("--no-ui", action="store_true", help="skip the Dagster UI's partition page")
    p.add_argument("--encoder", action="store_true", help="also measure the bundled CPU encoder's throughput")
    p.add_argument("--encoder-only", action="store_true", help="only measure the CPU encoder (and project each size)")
    p.add_argument("--output", type=Path, default=RESULTS / "company_scale.json")
    return p


if __name__ == "__main__":
    main()
