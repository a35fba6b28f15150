"""Post -> searchable with Slack events on, and with the scheduled sync alone (issue 66 item 5).

Each arm starts the Slack Web API emulator (three public channels and a private one, a message each from
yesterday), a fresh data folder and DAGSTER_HOME, and the real ``rag-pipeline serve`` (the bundled encoder, no
reranker), whose ingestion API runs a first sync (the watermarks). Then messages are posted to the emulator in
bursts over the public channels, and each one's token is searched for as a member (``POST /v1/search``, BM25: the
same write makes it searchable to every mode, and a cheap poll leaves the cores to the syncs) once a second until
found. Then edits (the new text found), deletes (the message gone from search) and a new member of the private
channel (who can then read its message).

* **events**: the service has ``RAG_SLACK_SIGNING_SECRET``; every change is followed by its Slack event, signed by
  the kit's :class:`SlackEventSender` (``message``, ``message_changed``, ``message_deleted``,
  ``member_joined_channel``): the service's targeted syncs (coalesced, one job at a time) index it.
* **scheduled**: no secret, no events: the scheduled sync alone, ticking every ``--interval`` seconds. The tick is
  ``POST /v1/ingest {"source": "slack"}`` (``rag-pipeline sync``: the same planner and Dagster runs as the daemon's
  sync sensor, without the daemon's own start-up and sensor interval); the project's default cron is hourly
  (``RAG_RAW_SYNC_CRON=0 * * * *``), so its figures scale up with the interval: about interval / 2 + a sync's length.

    .venv/bin/python -m bench.freshness [--bursts 5 --per-channel 8 --gap 20 --interval 60]
                                        [--arms events scheduled] [--out bench/results/freshness.json]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench import common
from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.emulators.push_senders import SlackEventSender
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace

READERS_TOKEN = "bench-readers-token-01"
INGEST_TOKEN = "bench-ingest-token-01"
SIGNING_SECRET = "bench-freshness-signing-secret-0001"
INGEST = {"Authorization": f"Bearer {INGEST_TOKEN}"}
CHANNELS = ("C0FRESHA1", "C0FRESHB1", "C0FRESHC1")
PRIVATE = "C0FRESHP1"


def slack_ts(seconds: float) -> str:
    """A Slack message timestamp (seconds with six decimals, as the Web API writes them)."""
    return f"{seconds:.6f}"


def workspace() -> SlackWorkspace:
    ws = SlackWorkspace(team_id=F.CRAFTED_TEAM, domain=F.CRAFTED_DOMAIN)
    ws.users = [F._user(F.ALICE, "alice", "Alice Anders"), F._user(F.BOB, "bob", "Bob Brown"),
                F._user(F.BOT_USER, "rag-bot", "RAG Bot", is_bot=True)]  # fmt: skip
    yesterday = int(time.time()) - 86400
    for i, channel in enumerate(CHANNELS):
        ws.add_channel(channel, f"fresh-{i}", members=[F.ALICE, F.BOB, F.BOT_USER], created=yesterday - 86400)
        ws.post(channel, F._msg(slack_ts(yesterday + i), F.ALICE, f"seedword{i} the channel opened yesterday"))
    ws.add_channel(PRIVATE, "fresh-private", is_private=True, members=[F.ALICE, F.BOT_USER], created=yesterday - 86400)
    ws.post(PRIVATE, F._msg(slack_ts(yesterday + 9), F.ALICE, "privateword the okapi budget is frozen"))
    return ws


class Arm:
    """One service over one emulator: posts changes, polls search, keeps the jobs' record."""

    def __init__(self, service: S.ServiceProcess, ws: SlackWorkspace, events: bool) -> None:
        self.service = service
        self.ws = ws
        self.sender = SlackEventSender(f"{service.url}/events/slack", SIGNING_SECRET, team_id=F.CRAFTED_TEAM)
        self.events = events
        self.refused: list[str] = []

    def send(self, event: dict[str, Any]) -> None:
        if self.events:
            answer = self.sender.send(event)
            if answer.status_code != 200:
                self.refused.append(answer.text[:200])

    def found(self, token: str, user: str = F.ALICE) -> bool:
        answer = httpx.post(f"{self.service.url}/v1/search", json={"query": token, "mode": "bm25", "top_k": 5},
                            headers={"Authorization": f"Bearer {READERS_TOKEN}", "X-User-Id": user},
                            timeout=120)  # fmt: skip
        if answer.status_code != 200:  # the index reopening after a write: not searchable yet
            return False
        texts = ((r.get("parent_text") or "") + (r.get("child_text") or "") for r in answer.json()["results"])
        return any(token in text for text in texts)

    def jobs(self) -> list[dict[str, Any]]:
        status = httpx.get(f"{self.service.url}/v1/scheduler/status", headers=INGEST, timeout=120)
        return list(status.json().get("jobs", [])) if status.status_code == 200 else []

    def sync_now(self) -> bool:
        """A tick of the scheduled sync: False when a job already runs (the tick is skipped, as a sensor's is)."""
        started = httpx.post(f"{self.service.url}/v1/ingest", json={"source": "slack"}, headers=INGEST, timeout=30)
        return started.status_code == 202

    def wait_jobs_done(self, timeout: float = 900) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            jobs = self.jobs()
            if jobs and all(j["state"] in ("succeeded", "failed") for j in jobs):
                return
            time.sleep(1)
        raise SystemExit(f"jobs still running after {timeout} s: {self.jobs()}")


def poll(pending: dict[str, float], check: Callable[[str], bool], timeout: float) -> dict[str, float]:
    """Seconds from each token's change (``pending``: token -> perf_counter at the change) until ``check`` holds."""
    done: dict[str, float] = {}
    deadline = time.perf_counter() + timeout
    while len(done) < len(pending) and time.perf_counter() < deadline:
        for token, at in pending.items():
            if token not in done and check(token):
                done[token] = time.perf_counter() - at
        time.sleep(1)
    return done


def summary(seconds: list[float], expected: int) -> dict[str, Any]:
    ordered = sorted(seconds)

    def rank(q: float) -> float | None:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else None

    return {"n": expected, "reflected": len(ordered), "p50_s": rank(0.5), "p95_s": rank(0.95),
            "max_s": round(ordered[-1], 1) if ordered else None,
            "mean_s": round(statistics.fmean(ordered), 1) if ordered else None}  # fmt: skip


def run_arm(name: str, args: Any, root: Path) -> dict[str, Any]:
    events = name == "events"
    ws = workspace()
    with SlackEmulator(ws) as emulator:
        (root / "dagster_home").mkdir(parents=True)
        env = {"RAG_SERVE_TOKEN": READERS_TOKEN, "RAG_INGEST_TOKEN": INGEST_TOKEN, "SLACK_BOT_TOKEN": "xoxb-test-token",
               "SLACK_API_BASE_URL": emulator.base_url, "DAGSTER_HOME": str(root / "dagster_home"),
               "RAG_RERANKER": "none"}  # fmt: skip
        if events:
            env |= {"RAG_SLACK_SIGNING_SECRET": SIGNING_SECRET, "RAG_EVENTS_DEBOUNCE_SECONDS": str(args.debounce)}
        service = S.ServiceProcess(root / "data", root / "serve.log", **env)
        ticks: list[float] = []
        stop = threading.Event()
        try:
            service.wait_ready(status=503)
            arm = Arm(service, ws, events)
            first_started = time.perf_counter()
            assert arm.sync_now(), "the first sync did not start"
            arm.wait_jobs_done()
            first_sync_s = time.perf_counter() - first_started
            if arm.jobs()[0]["state"] != "succeeded":
                raise SystemExit(f"the first sync failed: {Path(arm.jobs()[0]['log']).read_text()[-3000:]}")
            if not poll({"seedword0": time.perf_counter()}, arm.found, 120):
                raise SystemExit(f"the first sync indexed nothing: {arm.jobs()}\n{service.log()[-3000:]}")

            def scheduler() -> None:
                while not stop.wait(args.interval):
                    if arm.sync_now():
                        ticks.append(time.perf_counter())

            if not events:
                threading.Thread(target=scheduler, daemon=True).start()
            load_before = os.getloadavg()

            # Posts: bursts over the public channels, a gap between bursts; polled from the first post on.
            posted: dict[str, float] = {}
            where: dict[str, tuple[str, str]] = {}
            results: dict[str, float] = {}
            poller_done = threading.Event()

            def poller() -> None:
                while not poller_done.is_set() or len(results) < len(posted):
                    for token, at in list(posted.items()):
                        if token not in results and arm.found(token):
                            results[token] = time.perf_counter() - at
                    if poller_done.is_set() and time.perf_counter() > give_up[0]:
                        return
                    time.sleep(1)

            give_up = [float("inf")]
            watcher = threading.Thread(target=poller, daemon=True)
            watcher.start()
            for burst in range(args.bursts):
                for c, channel in enumerate(CHANNELS):
                    for i in range(args.per_channel):
                        token = f"fresh{burst:02d}c{c}m{i:02d}"
                        message = F._msg(f"{time.time():.6f}", F.BOB, f"{token} the status update for today")
                        ws.post(channel, message)
                        posted[token] = time.perf_counter()
                        where[token] = (channel, message["ts"])
                        arm.send(SlackEventSender.message(channel, message["ts"], F.BOB, message["text"]))
                        time.sleep(0.05)
                time.sleep(args.gap)
            give_up[0] = time.perf_counter() + args.timeout
            poller_done.set()
            watcher.join()
            posts = summary(list(results.values()), len(posted))

            # Edits: five messages get a new token; reflected when the new token is found.
            edited: dict[str, float] = {}
            for k, token in enumerate(sorted(results)[: args.changes]):
                channel, message_ts = where[token]
                new_token = f"edited{k:02d}word"
                new_text = f"{token} {new_token} the status update, corrected"
                ws.edit(channel, message_ts, new_text, f"{time.time():.6f}")
                edited[new_token] = time.perf_counter()
                arm.send({"type": "message", "subtype": "message_changed", "channel": channel,
                          "ts": f"{time.time():.6f}", "hidden": True, "channel_type": "channel",
                          "message": {"type": "message", "user": F.BOB, "text": new_text, "ts": message_ts,
                                      "edited": {"user": F.BOB, "ts": f"{time.time():.6f}"}}})  # fmt: skip
            edits = summary(list(poll(edited, arm.found, args.timeout).values()), len(edited))

            # Deletes: five other messages; reflected when search no longer finds them.
            deleted: dict[str, float] = {}
            for token in sorted(results)[args.changes : 2 * args.changes]:
                channel, message_ts = where[token]
                ws.delete(channel, message_ts)
                deleted[token] = time.perf_counter()
                arm.send(SlackEventSender.deleted(channel, message_ts))
            deletes = summary(list(poll(deleted, lambda t: not arm.found(t), args.timeout).values()), len(deleted))

            # Bob joins the private channel: reflected when he finds its message.
            assert not arm.found("privateword", F.BOB), "Bob read the private channel before he joined"
            ws.add_member(PRIVATE, F.BOB)
            joined_at = time.perf_counter()
            arm.send(SlackEventSender.member_joined(PRIVATE, F.BOB))
            joined = poll({"privateword": joined_at}, lambda t: arm.found(t, F.BOB), args.timeout)
            stop.set()
            load_after = os.getloadavg()
            arm.wait_jobs_done()
            jobs = arm.jobs()[1:]  # the first sync is not the arm's
            return {
                "events": events,
                "scheduled_interval_s": None if events else args.interval,
                "events_debounce_s": args.debounce if events else None,
                "first_sync_s": round(first_sync_s, 1),
                "posts": posts,
                "edits": edits,
                "deletes": deletes,
                "member_joined_s": round(joined["privateword"], 1) if joined else None,
                "jobs": len(jobs),
                "jobs_failed": sum(j["state"] == "failed" for j in jobs),
                "job_seconds": job_seconds(jobs),
                "events_refused": arm.refused[:5],
                "load_average_before": [round(x, 2) for x in load_before],
                "load_average_after": [round(x, 2) for x in load_after],
                "freshness_histogram": freshness_samples(service.url) if events else None,
            }
        finally:
            stop.set()
            service.stop()


def job_seconds(jobs: list[dict[str, Any]]) -> list[float]:
    """Each job's sync seconds (the child command's wall time), sorted."""
    found = (r.get("seconds") for j in jobs for r in j["results"].values() if isinstance(r, dict))
    return sorted(round(float(s), 1) for s in found if s is not None)


def freshness_samples(url: str) -> dict[str, float]:
    """The service's own ``rag_event_freshness_seconds`` count and sum (its view of the same events)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {READERS_TOKEN}"}, timeout=30).text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "rag_event_freshness_seconds":
            for sample in family.samples:
                if sample.name.endswith(("_count", "_sum")):
                    out[sample.name.rsplit("_", 1)[1]] = sample.value
    return out


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--bursts", type=int, default=5, help="bursts of posts (default 5)")
    parser.add_argument("--per-channel", type=int, default=8, help="posts per channel per burst (default 8)")
    parser.add_argument("--gap", type=float, default=20, help="seconds between bursts (default 20)")
    parser.add_argument("--changes", type=int, default=5, help="edits, and deletes (default 5 each)")
    parser.add_argument("--interval", type=float, default=60, help="scheduled arm's tick, seconds (default 60)")
    parser.add_argument("--debounce", type=float, default=2.0, help="RAG_EVENTS_DEBOUNCE_SECONDS (default 2)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a change (default 600)")
    parser.add_argument("--arms", nargs="+", default=["events", "scheduled"], choices=["events", "scheduled"])
    parser.add_argument("--out", type=Path, default=common.RESULTS / "freshness.json", help="JSON results file")
    args = parser.parse_args()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    arms: dict[str, Any] = {}
    for name in args.arms:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
            started = time.perf_counter()
            arms[name] = run_arm(name, args, Path(tmp))
            arms[name]["arm_seconds"] = round(time.perf_counter() - started, 1)
        print(json.dumps({name: arms[name]}, indent=2), flush=True)
    result = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "run": common.run_record(),
        "uptime_at_start": uptime,
        "encoder": "the bundled dense model (RAG_DENSE_MODEL default: all-MiniLM-L6-v2), reranker off",
        "target_p50_s": 30,
        "arms": arms,
        "note": "seconds from posting a message to the emulator (and, in the events arm, sending its signed event) "
        "to the first BM25 search as a member that finds it, polled once a second; the machine is shared with "
        "other jobs: figures under load are upper bounds",
    }
    common.write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
