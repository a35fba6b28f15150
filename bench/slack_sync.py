"""Live Slack connector benchmark: Web API calls per backfilled channel-day and backfill wall time.

Everything runs against the Slack Web API emulator (rag_pipeline_tests/kit/emulators/slack_api.py) on 127.0.0.1,
serving a synthetic workspace: the bundled export's threads spread over CHANNELS x DAYS
(kit/slack_fixtures.synthetic_workspace), plus --late-replies replies posted 1..DAYS-1 days after their root
(the synthetic workspace keeps every reply on its root's day, so without them a lookback finds nothing).
Every "run" uses a fresh reader (its own WebClient, user and channel caches), as a Dagster run does.

1. API calls per backfilled channel-day with SlackApiReader.read_days (page_size 200, emulator max_limit 1000):
   (a) daily runs, read_days(channel, [day]) per channel-day (what a daily/hourly schedule does), lookback 30;
   (b) the same with lookback 0; (c) one range read per channel, read_days(channel, all days) (a single-run
   backfill), lookback 30; (d) daily runs with rescan_thread_replies. Documents of (a) and (c) must be
   identical (same ids, same documents, last partition day = the thread's last activity day): checked, and
   the script exits 1 after writing the results when they differ. "Thread versions" are (thread, partition
   day) pairs a run emits; (b) misses those of late replies.
2. Wall time of the backfill (range read per channel, lookback 30) at Tier 3 (page_size 200, max_limit 1000,
   no rate limit) and in the 2025 non-Marketplace regime (page_size 15, max_limit 15, conversations.history
   and conversations.replies limited to --throttle-requests per --throttle-window seconds per method,
   answered 429 with Retry-After: 0). slack-sdk's RateLimitErrorRetryHandler sleeps Retry-After + random()
   (0-1 s) per 429, which dominates. The real regimes are extrapolated from the requests made: history/replies
   requests x 60 s (1 request/minute), and a sequential schedule with per-method windows (60 s; Tier 3:
   50 requests/minute, 1.2 s).
3. --with-dagster: the same backfill through rag_pipeline.runs.live_sync.run_sync (the real Dagster chain,
   embeddings included, reconciliation on) into a temporary data dir, Tier 3 regime.

    .venv/bin/python -m bench.slack_sync [--channels 5] [--days 30] [--with-dagster] [--out FILE.json]
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import slack_sdk

from bench import common
from rag_pipeline.connectors.slack.api import SlackApiReader, SlackSyncSettings, build_web_client
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.document import Document
from rag_pipeline_tests.kit.emulators.slack_api import RateLimit, RecordedRequest, SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import BOT_USER_ID, SlackWorkspace
from rag_pipeline_tests.kit.slack_fixtures import synthetic_channel_id, synthetic_workspace

THREAD_METHODS = ("conversations.history", "conversations.replies")
OVERHEAD_METHODS = ("auth.test", "users.list", "conversations.info")
DAY = 86400


# -- workspace --------------------------------------------------------------------------------------------------------


def add_late_replies(ws: SlackWorkspace, count: int, start: str, days: int, seed: int) -> int:
    """Post ``count`` replies to random roots, 1..(days left in the range) days after the root's day; returns how
    many were posted (roots on the last day cannot get one)."""
    rng = random.Random(seed + 1)
    base = int(datetime.strptime(start, "%Y-%m-%d").replace(tzinfo=UTC).timestamp())
    candidates = [
        (channel.id, message)
        for channel in ws.channels.values()
        for message in channel.sorted_messages()
        if (message.get("thread_ts") or message["ts"]) == message["ts"]
        and message.get("subtype") != "tombstone"
        and (int(float(message["ts"])) - base) // DAY < days - 1
    ]
    posted = 0
    for channel_id, root in rng.sample(candidates, min(count, len(candidates))):
        channel = ws.channels[channel_id]
        root_day = (int(float(root["ts"])) - base) // DAY
        later = rng.randint(root_day + 1, days - 1)
        seconds = base + later * DAY + rng.randrange(DAY)
        ts = f"{seconds}.{rng.randrange(1_000_000):06d}"
        if ts in channel.messages:
            continue
        users = [u for u in channel.members if u != BOT_USER_ID] or [BOT_USER_ID]
        text = f"Late follow-up, {later - root_day} day(s) on: did that fix it for you?"
        ws.post(channel_id, {"ts": ts, "user": rng.choice(users), "text": text, "thread_ts": root["ts"]})
        posted += 1
    return posted


def workspace_stats(ws: SlackWorkspace) -> dict[str, Any]:
    def day(ts: str) -> str:
        return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%d")

    messages = roots = replies = cross_day = tombstones = threads = edited = 0
    for channel in ws.channels.values():
        threads += len(channel.thread_index())
        for message in channel.messages.values():
            messages += 1
            edited += bool(message.get("edited"))
            tombstones += message.get("subtype") == "tombstone"
            if (message.get("thread_ts") or message["ts"]) != message["ts"]:
                replies += 1
                cross_day += day(message["ts"]) != day(message["thread_ts"])
            else:
                roots += 1
    return {
        "channels": len(ws.channels),
        "users": len(ws.users),
        "messages": messages,
        "roots": roots,
        "replies": replies,
        "threads_with_replies": threads,
        "replies_on_a_later_day_than_root": cross_day,
        "tombstoned_roots": tombstones,
        "edited_messages": edited,
    }


# -- measuring ----------------------------------------------------------------------------------------------------


@dataclass
class Backfill:
    """What a set of reader runs did."""

    runs: int = 0
    channel_days: int = 0
    seconds: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    threads_fetched: int = 0
    emitted: list[tuple[Document, str]] = field(default_factory=list)  # (document, partition day)
    requests: list[RecordedRequest] = field(default_factory=list)

    def http(self, status: int | None = None) -> Counter[str]:
        return Counter(r.method for r in self.requests if status is None or r.status == status)

    def summary(self) -> dict[str, Any]:
        thread_calls = sum(self.calls[m] for m in THREAD_METHODS)
        overhead = sum(self.calls[m] for m in OVERHEAD_METHODS)
        api_calls = sum(self.calls.values())
        return {
            "runs": self.runs,
            "channel_days": self.channel_days,
            "api_calls": api_calls,
            "api_calls_per_channel_day": round(api_calls / self.channel_days, 2),
            "history_replies_calls": thread_calls,
            "history_replies_calls_per_channel_day": round(thread_calls / self.channel_days, 2),
            "per_run_overhead_calls": overhead,
            "calls_by_method": dict(sorted(self.calls.items())),
            "http_requests": len(self.requests),
            "http_429_by_method": dict(sorted(self.http(429).items())),
            "retries_by_kind": dict(sorted(self.retries.items())),
            "threads_fetched": self.threads_fetched,
            "documents": len({doc.id for doc, _ in self.emitted}),
            "thread_versions": len(self.emitted),
            "seconds": round(self.seconds, 3),
        }


def backfill(
    emulator: SlackEmulator,
    channel_ids: Sequence[str],
    days: Sequence[str],
    settings: SlackSyncSettings,
    *,
    daily: bool,
) -> Backfill:
    """Daily runs (one read_days per channel-day) or range runs (one read_days per channel), each with a fresh
    reader, sequentially."""
    out = Backfill(channel_days=len(channel_ids) * len(days))
    jobs = [(c, [d]) for d in days for c in channel_ids] if daily else [(c, list(days)) for c in channel_ids]
    first_request = len(emulator.requests)
    started = time.perf_counter()
    for channel_id, run_days in jobs:
        stats = ApiStats()
        reader = SlackApiReader(build_web_client(emulator.token, emulator.base_url, stats=stats), settings)
        read = reader.read_days(channel_id, run_days)
        out.runs += 1
        out.calls.update(stats.calls)
        out.retries.update(stats.retries)
        out.threads_fetched += read.threads_fetched
        out.emitted.extend((doc, read.partition_day[doc.id]) for doc in read.documents)
    out.seconds = time.perf_counter() - started
    out.requests = emulator.requests[first_request:]
    return out


# -- documents ----------------------------------------------------------------------------------------------------


def latest_versions(emitted: Iterable[tuple[Document, str]]) -> tuple[dict[str, tuple[Document, str]], list[str]]:
    """Each thread's document of its latest partition day, and the ids emitted with different documents (a static
    workspace should give the same document whichever run read it)."""
    out: dict[str, tuple[Document, str]] = {}
    inconsistent: set[str] = set()
    for doc, day in emitted:
        previous = out.get(doc.id)
        if previous is not None and previous[0] != doc:
            inconsistent.add(doc.id)
        if previous is None or day >= previous[1]:
            out[doc.id] = (doc, day)
    return out, sorted(inconsistent)


def compare(reference: Backfill, other: Backfill, examples: int = 5) -> dict[str, Any]:
    """Documents of ``other`` against ``reference``: ids missing or extra, documents that differ (and in which
    fields), threads whose latest partition day differs, threads left in a partition before their last activity."""
    ref, ref_bad = latest_versions(reference.emitted)
    got, got_bad = latest_versions(other.emitted)
    missing = sorted(set(ref) - set(got))
    extra = sorted(set(got) - set(ref))
    differs: dict[str, list[str]] = {}
    moved: dict[str, tuple[str, str]] = {}
    for doc_id in sorted(set(ref) & set(got)):
        (a, a_day), (b, b_day) = ref[doc_id], got[doc_id]
        if a != b:
            da, db = a.model_dump(), b.model_dump()
            differs[doc_id] = sorted(k for k in da if da[k] != db[k])
        if a_day != b_day:
            moved[doc_id] = (a_day, b_day)
    stale = sorted(doc_id for doc_id, (doc, day) in got.items() if day != doc.day)
    return {
        "identical": not (missing or extra or differs or moved or ref_bad or got_bad),
        "thread_versions": {"reference": len(reference.emitted), "other": len(other.emitted)},
        "fewer_thread_versions": len(reference.emitted) - len(other.emitted),
        "missing_documents": len(missing),
        "extra_documents": len(extra),
        "documents_differing": len(differs),
        "latest_partition_day_differs": len(moved),
        "threads_not_in_their_last_activity_day": len(stale),
        "inconsistent_within_run": {"reference": len(ref_bad), "other": len(got_bad)},
        "examples": {
            "missing": missing[:examples],
            "extra": extra[:examples],
            "differing_fields": dict(list(differs.items())[:examples]),
            "latest_partition_day (reference, other)": dict(list(moved.items())[:examples]),
            "not_in_last_activity_day": stale[:examples],
        },
    }


# -- real-regime extrapolation -----------------------------------------------------------------------------------


def sequential_schedule(requests: Sequence[RecordedRequest], interval: float) -> float:
    """Seconds a sequential client needs for these answered requests when history and replies each allow one
    request per ``interval`` seconds (per method, as Slack limits per method) and everything else is free."""
    clock = 0.0
    next_free: dict[str, float] = {}
    for request in requests:
        if request.status == 200 and request.method in THREAD_METHODS:
            clock = max(clock, next_free.get(request.method, 0.0))
            next_free[request.method] = clock + interval
    return clock


def extrapolate(run: Backfill, per_minute: float) -> dict[str, Any]:
    answered = sum(c for m, c in run.http(200).items() if m in THREAD_METHODS)
    naive = answered * 60.0 / per_minute
    scheduled = sequential_schedule(run.requests, 60.0 / per_minute)
    return {
        "history_replies_requests": answered,
        "requests_per_minute_per_method": per_minute,
        "requests_x_interval_seconds": round(naive),
        "requests_x_interval_hours": round(naive / 3600, 2),
        "sequential_per_method_schedule_seconds": round(scheduled),
        "sequential_per_method_schedule_hours": round(scheduled / 3600, 2),
    }


# -- Dagster ------------------------------------------------------------------------------------------------------


def dagster_backfill(ws: SlackWorkspace, start: str, end: str) -> dict[str, Any]:
    """The backfill through run_sync (the real Dagster chain) into a temporary data dir, Tier 3 regime."""
    from rag_pipeline.defs.slack.resources import SlackResource
    from rag_pipeline.runs.live_sync import run_sync
    from rag_pipeline.settings import Settings

    with SlackEmulator(ws, max_limit=1000) as emulator, tempfile.TemporaryDirectory(prefix="slack_bench_") as tmp:
        os.environ["SLACK_BOT_TOKEN"] = emulator.token
        os.environ["DAGSTER_HOME"] = str(Path(tmp) / "dagster_home")  # never the user's instance
        slack = SlackResource(token=emulator.token, base_url=emulator.base_url, page_size=200, lookback_days=30)
        started = time.perf_counter()
        summary = run_sync(Settings.from_env().with_data_dir(tmp), "slack", start, end, resource=slack, reconcile=True)
        seconds = time.perf_counter() - started
        return {
            "seconds": round(seconds, 2),
            "summary": summary.as_dict(),
            "http_requests_by_method": dict(sorted(Counter(r.method for r in emulator.requests).items())),
        }


# -- report -------------------------------------------------------------------------------------------------------

SCENARIOS = {
    "a_daily_lookback30": "(a) daily runs, lookback 30",
    "b_daily_lookback0": "(b) daily runs, lookback 0",
    "c_range_lookback30": "(c) one range read per channel, lookback 30",
    "d_daily_lookback30_rescan": "(d) daily runs, lookback 30, rescan_thread_replies",
}


def markdown(report: dict[str, Any]) -> str:
    cfg, ws = report["config"], report["workspace"]
    methods = sorted({m for s in report["calls_per_channel_day"].values() for m in s["calls_by_method"]})
    lines = [
        "# Live Slack connector: API calls and backfill wall time (emulator)",
        "",
        f"Workspace: {cfg['channels']} channels x {cfg['days']} days from {cfg['start']} (seed {cfg['seed']}): "
        f"{ws['roots']} roots, {ws['replies']} replies ({ws['threads_with_replies']} threads with replies, "
        f"{ws['tombstoned_roots']} tombstoned roots), {ws['users']} users; {cfg['late_replies_posted']} late "
        f"replies added ({ws['replies_on_a_later_day_than_root']} replies on a later day than their root). "
        "One fresh reader per run.",
        "",
        "## 1. API calls per backfilled channel-day (page_size 200)",
        "",
        "| scenario | runs | calls | calls / channel-day | history+replies / channel-day | "
        + " | ".join(methods)
        + " | documents | thread versions | seconds |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(methods) + "---:|---:|---:|",
    ]
    for key, label in SCENARIOS.items():
        s = report["calls_per_channel_day"][key]
        per_method = " | ".join(str(s["calls_by_method"].get(m, 0)) for m in methods)
        lines.append(
            f"| {label} | {s['runs']} | {s['api_calls']} | {s['api_calls_per_channel_day']} | "
            f"{s['history_replies_calls_per_channel_day']} | {per_method} | {s['documents']} | "
            f"{s['thread_versions']} | {s['seconds']} |"
        )
    docs = report["documents"]
    lines += ["", "Documents compared with (a) (latest version of each thread):", ""]
    lines += ["| vs (a) | identical | fewer thread versions | missing | differing | last day differs | stale |"]
    lines += ["|---|---|---:|---:|---:|---:|---:|"]
    for key, label in (("c_vs_a", "(c)"), ("b_vs_a", "(b)"), ("d_vs_a", "(d)")):
        d = docs[key]
        lines.append(
            f"| {label} | {'yes' if d['identical'] else 'NO'} | {d['fewer_thread_versions']} | "
            f"{d['missing_documents']} | {d['documents_differing']} | {d['latest_partition_day_differs']} | "
            f"{d['threads_not_in_their_last_activity_day']} |"
        )
    lines += [
        "",
        '"fewer thread versions": fewer (thread, partition day) pairs emitted than (a); a range read emits each '
        'thread once, in its last activity day, by design. "stale": threads whose latest emitted partition is not '
        "the day of their last activity (a live run would keep an older version of them).",
        "",
        f"## 2. Backfill wall time ({cfg['channels']} channels x {cfg['days']} days, range read per channel, "
        "lookback 30)",
        "",
        "| regime | page_size | calls | history+replies calls | HTTP requests | 429s | retries | seconds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    regimes = [(k, v) for k, v in (("tier3", "Tier 3"), ("non_marketplace", "non-Marketplace (emulated)"))]
    regimes = [(k, v) for k, v in regimes if k in report["backfill_wall_time"]]
    for key, label in regimes:
        r = report["backfill_wall_time"][key]
        seconds = f"{r['seconds_median']} (min {r['seconds_min']}, n={len(r['seconds_runs'])})"
        lines.append(
            f"| {label} | {r['page_size']} | {r['api_calls']} | {r['history_replies_calls']} | "
            f"{r['http_requests']} | {sum(r['http_429_by_method'].values())} | "
            f"{sum(r['retries_by_kind'].values())} | {seconds} |"
        )
    nm = report["backfill_wall_time"].get("non_marketplace")
    if nm:
        lines += [
            "",
            f"Emulated limit: {cfg['throttle_requests']} request(s) per {cfg['throttle_window']} s per method on "
            f"conversations.history/replies, 429 with Retry-After: 0; the SDK sleeps 0 + random() s per 429 "
            f"({nm['seconds_per_429']} s of wall time per 429 here).",
        ]
    lines += [
        "",
        "Extrapolated to the real limits (answered history/replies requests; other methods taken as free):",
        "",
        "| regime | history+replies requests | limit per method | requests x interval | sequential schedule |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, label in regimes:
        e = report["backfill_wall_time"][key]["real_regime"]
        lines.append(
            f"| {label} | {e['history_replies_requests']} | {e['requests_per_minute_per_method']}/min | "
            f"{e['requests_x_interval_seconds']} s ({e['requests_x_interval_hours']} h) | "
            f"{e['sequential_per_method_schedule_seconds']} s ({e['sequential_per_method_schedule_hours']} h) |"
        )
    same = report["backfill_wall_time"].get("non_marketplace_documents_vs_tier3")
    if same:
        lines += ["", f"Non-Marketplace documents identical to Tier 3: {'yes' if same['identical'] else 'NO'}."]
    if report.get("dagster"):
        dg_report = report["dagster"]
        lines += [
            "",
            "## 3. Through run_sync (Dagster chain, embeddings, reconciliation), Tier 3",
            "",
            f"{dg_report['seconds']} s; summary: `{json.dumps(dg_report['summary'])}`",
        ]
    lines += ["", f"Command: `{report['command']}`", ""]
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--channels", type=int, default=5, help="synthetic channels (default 5)")
    parser.add_argument("--days", type=int, default=30, help="synthetic days, all backfilled (default 30)")
    parser.add_argument("--start", default="2024-01-01", help="first day (UTC, default 2024-01-01)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic workspace seed (default 0)")
    parser.add_argument(
        "--late-replies", type=int, default=60, help="replies added 1..days-1 days after their root (default 60)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="Tier 3 backfill timings (default 3)")
    parser.add_argument(
        "--throttle-requests", type=int, default=1, help="emulated history/replies requests per window (default 1)"
    )
    parser.add_argument(
        "--throttle-window", type=float, default=0.05, help="emulated rate-limit window, seconds (default 0.05)"
    )
    parser.add_argument("--skip-throttled", action="store_true", help="skip the non-Marketplace backfill")
    parser.add_argument("--with-dagster", action="store_true", help="also backfill through run_sync (slow)")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "slack_sync.json", help="JSON (+ .md)")
    args = parser.parse_args(argv)

    first = date.fromisoformat(args.start)
    days = [(first + timedelta(days=i)).isoformat() for i in range(args.days)]
    channel_ids = [synthetic_channel_id(i) for i in range(args.channels)]
    ws = synthetic_workspace(args.channels, args.days, args.start, args.seed)
    late = add_late_replies(ws, args.late_replies, args.start, args.days, args.seed)
    report: dict[str, Any] = {
        "command": common.command_line(argv),
        "config": {
            "channels": args.channels,
            "days": args.days,
            "start": args.start,
            "seed": args.seed,
            "late_replies_requested": args.late_replies,
            "late_replies_posted": late,
            "throttle_requests": args.throttle_requests,
            "throttle_window": args.throttle_window,
        },
        "environment": {
            **common.machine(),
            "slack_sdk": slack_sdk.version.__version__,
            "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "workspace": workspace_stats(ws),
    }

    # 1. calls per channel-day
    tier3 = SlackSyncSettings(page_size=200, lookback_days=30)
    rescan = SlackSyncSettings(page_size=200, lookback_days=30, rescan_thread_replies=True)
    settings = {
        "a_daily_lookback30": (tier3, True),
        "b_daily_lookback0": (SlackSyncSettings(page_size=200, lookback_days=0), True),
        "c_range_lookback30": (tier3, False),
        "d_daily_lookback30_rescan": (rescan, True),
    }
    runs: dict[str, Backfill] = {}
    for key, (scenario_settings, daily) in settings.items():
        with SlackEmulator(ws, max_limit=1000) as emulator:
            runs[key] = backfill(emulator, channel_ids, days, scenario_settings, daily=daily)
        print(f"{SCENARIOS[key]}: {runs[key].seconds:.1f} s", file=sys.stderr)
    report["calls_per_channel_day"] = {key: run.summary() for key, run in runs.items()}
    report["documents"] = {
        "c_vs_a": compare(runs["a_daily_lookback30"], runs["c_range_lookback30"]),
        "b_vs_a": compare(runs["a_daily_lookback30"], runs["b_daily_lookback0"]),
        "d_vs_a": compare(runs["a_daily_lookback30"], runs["d_daily_lookback30_rescan"]),
    }

    # 2. wall time, Tier 3 and non-Marketplace
    timings: list[Backfill] = []
    for _ in range(max(args.repeat, 1)):
        with SlackEmulator(ws, max_limit=1000) as emulator:
            timings.append(backfill(emulator, channel_ids, days, tier3, daily=False))
    wall: dict[str, Any] = {"tier3": regime(timings, 200, 50.0)}
    print(f"Tier 3 backfill: {wall['tier3']['seconds_median']} s", file=sys.stderr)
    if not args.skip_throttled:
        limit = RateLimit(args.throttle_requests, args.throttle_window, retry_after=0)
        throttled_settings = SlackSyncSettings(page_size=15, lookback_days=30)
        with SlackEmulator(ws, max_limit=15, rate_limits=dict.fromkeys(THREAD_METHODS, limit)) as emulator:
            throttled = backfill(emulator, channel_ids, days, throttled_settings, daily=False)
        wall["non_marketplace"] = regime([throttled], 15, 1.0)
        wall["non_marketplace_documents_vs_tier3"] = compare(timings[0], throttled)
        print(f"non-Marketplace backfill: {throttled.seconds:.1f} s", file=sys.stderr)
    report["backfill_wall_time"] = wall

    # 3. Dagster
    if args.with_dagster:
        report["dagster"] = dagster_backfill(ws, days[0], days[-1])
        print(f"run_sync: {report['dagster']['seconds']} s", file=sys.stderr)

    common.write_json(args.out, report)
    md = markdown(report)
    args.out.with_suffix(".md").write_text(md)
    print(md)
    print(f"results: {args.out} and {args.out.with_suffix('.md')}")

    problems = []
    if not report["documents"]["c_vs_a"]["identical"]:
        problems.append("documents of (a) daily runs and (c) range reads differ")
    if not args.skip_throttled and not wall["non_marketplace_documents_vs_tier3"]["identical"]:
        problems.append("documents of the non-Marketplace backfill differ from Tier 3")
    for problem in problems:
        print(f"CHECK FAILED: {problem} (see 'documents' in {args.out})", file=sys.stderr)
    return 1 if problems else 0


def regime(timings: Sequence[Backfill], page_size: int, per_minute: float) -> dict[str, Any]:
    """One regime's backfill: the first run's calls, every run's seconds, the real-limit extrapolation."""
    seconds = [run.seconds for run in timings]
    out = {"page_size": page_size, **timings[0].summary()}
    out.pop("seconds")
    out["seconds_runs"] = [round(s, 3) for s in seconds]
    out["seconds_median"] = round(statistics.median(seconds), 3)
    out["seconds_min"] = round(min(seconds), 3)
    limited = sum(timings[0].http(429).values())
    out["seconds_per_429"] = round(min(seconds) / limited, 3) if limited else None
    out["real_regime"] = extrapolate(timings[0], per_minute)
    return out


if __name__ == "__main__":
    sys.exit(main())
