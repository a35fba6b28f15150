"""Where a targeted Slack sync's seconds go, step by step, and what the event-driven cuts save (issue 66 item 5).

Starts the Slack Web API emulator (bench.freshness's workspace), a fresh data folder and DAGSTER_HOME, runs a first
``rag-pipeline sync --source slack`` (the watermarks), then, ``--repeats`` times, posts one message to a channel and
runs the targeted sync the service's launcher would start for its event, as a fresh child process (the launcher's
way): ``sync --source slack --channel C --readable-only``, cycling through the three shapes a job can take:

* ``full``: as before the cuts (chain run, reconciliation run, directory refresh);
* ``no-directory``: a job of message events only (``--no-directory``);
* ``posts-only``: a job of new top-level messages only (``--no-directory --no-reconcile``).

The child marks wall-clock seconds since its spawn on stderr (Python start, imports, each Dagster run, the
directory), so the cycle is an A/B/C on the same machine within the same minutes. The service's index hand-overs
are not in it (no service runs): each skipped run is also one hand-over fewer in the service.

    .venv/bin/python -m bench.freshness_steps [--repeats 6] [--out bench/results/freshness_steps.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import common

SHAPES = {"full": [], "no-directory": ["--no-directory"], "posts-only": ["--no-directory", "--no-reconcile"]}
MARK = "STEP "


def child(argv: list[str]) -> int:
    """Run ``rag-pipeline argv`` with a mark per step on stderr (seconds since the parent spawned it)."""
    spawned = float(os.environ["STEP_SPAWNED"])

    def mark(what: str) -> None:
        print(f"{MARK}{what} {time.time() - spawned:.2f}", file=sys.stderr, flush=True)

    mark("python_started")
    import rag_pipeline.cli as cli
    import rag_pipeline.commands.sync as sync_command
    import rag_pipeline.runs.live_sync as live_sync

    mark("imported")
    runs = 0

    def timed(module: Any, name: str, label: str, numbered: bool = False) -> None:
        original = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal runs
            step = label
            if numbered:
                runs += 1
                step = f"{label}{runs}"
            mark(f"{step}_start")
            try:
                return original(*args, **kwargs)
            finally:
                mark(f"{step}_end")

        setattr(module, name, wrapper)

    timed(live_sync, "execute_run", "dagster_run", numbered=True)
    timed(sync_command, "_refresh_directory", "directory")
    code = cli.main(argv)
    mark("exit")
    return code


def _marks(stderr: str) -> dict[str, float]:
    found = (line[len(MARK) :].rsplit(" ", 1) for line in stderr.splitlines() if line.startswith(MARK))
    return {name: float(seconds) for name, seconds in found}


def steps(marks: dict[str, float]) -> dict[str, float]:
    """Each step's seconds from the marks (a step the job did not take is absent)."""
    out = {"python_start": marks["python_started"], "imports": marks["imported"] - marks["python_started"]}
    out["before_first_run"] = marks["dagster_run1_start"] - marks["imported"]
    run = 1
    while f"dagster_run{run}_start" in marks:
        out[f"dagster_run{run}"] = marks[f"dagster_run{run}_end"] - marks[f"dagster_run{run}_start"]
        run += 1
    if "directory_start" in marks:
        out["directory"] = marks["directory_end"] - marks["directory_start"]
    out["total"] = marks["exit"]
    return {k: round(v, 2) for k, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=6, help="targeted syncs, cycling the shapes (default 6)")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "freshness_steps.json", help="results file")
    args = parser.parse_args()

    from bench.freshness import CHANNELS, slack_ts, workspace
    from rag_pipeline_tests.kit import slack_fixtures as F
    from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator

    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    jobs: list[dict[str, Any]] = []
    ws = workspace()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, SlackEmulator(ws) as emulator:
        root = Path(tmp)
        (root / "dagster_home").mkdir()
        env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-test-token", "SLACK_API_BASE_URL": emulator.base_url,
               "DAGSTER_HOME": str(root / "dagster_home"), "RAG_RERANKER": "none"}  # fmt: skip

        def run(flags: list[str]) -> dict[str, Any]:
            env["STEP_SPAWNED"] = str(time.time())
            done = subprocess.run(
                [sys.executable, "-m", "bench.freshness_steps", "--child", "sync", "--source", "slack", *flags,
                 "--json", "--data-dir", str(root / "data")],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(f"sync {flags} failed: {done.stderr[-3000:]}")
            summary = json.loads(done.stdout)
            return {"flags": flags, "load_1min": round(os.getloadavg()[0], 1), "runs": summary["runs"],
                    "documents": summary["documents"], "steps": steps(_marks(done.stderr))}  # fmt: skip

        first = run([])
        for i in range(args.repeats):
            shape = list(SHAPES)[i % len(SHAPES)]
            ws.post(CHANNELS[0], F._msg(slack_ts(int(time.time())), F.ALICE, f"stepword{i} posted for a targeted sync"))
            job = run(["--channel", CHANNELS[0], "--readable-only", *SHAPES[shape]])
            jobs.append({"shape": shape, **job})
            print(json.dumps(jobs[-1]), flush=True)
    by_shape = {
        shape: {"n": len(totals), "total_median_s": round(statistics.median(totals), 1), "totals_s": totals}
        for shape in SHAPES
        if (totals := [j["steps"]["total"] for j in jobs if j["shape"] == shape])
    }
    common.write_json(args.out, {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "run": common.run_record(),
        "uptime_at_start": uptime,
        "encoder": "the bundled dense model (RAG_DENSE_MODEL default: all-MiniLM-L6-v2, backend auto), reranker off",
        "first_sync": first,
        "jobs": jobs,
        "by_shape": by_shape,
        "note": "seconds of one targeted `rag-pipeline sync` child per job, from its spawn; no service, so no index "
        "hand-overs; shapes interleaved on the same machine within minutes; the machine is shared: upper bounds",
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        raise SystemExit(child(sys.argv[2:]))
    raise SystemExit(main())
