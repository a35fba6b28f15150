"""Principal directory: what a sync costs (API calls, seconds) for a 5,000-user Slack workspace with 200 private
channels and a 2,000-account Jira site, full and incremental, and how long ``whois`` and ``explain`` take.

Everything runs against the project's Slack and Jira emulators on 127.0.0.1 through the real slack-sdk and
atlassian-python-api clients (the emulators answer in about a millisecond: real APIs add their latency and rate
limits per call, so the call counts are the figures that carry over). Run from the repository root::

    /usr/bin/time -v .venv/bin/python -m bench.directory_sync [--out bench/results/directory_sync.json]
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import common
from rag_pipeline.connectors.jira import directory as jira_directory
from rag_pipeline.connectors.jira.api import JiraApiReader, JiraSyncSettings
from rag_pipeline.connectors.jira.client import build_jira_client
from rag_pipeline.connectors.slack import directory as slack_directory
from rag_pipeline.connectors.slack.api import SlackApiReader, build_web_client
from rag_pipeline.directory.explain import explain
from rag_pipeline.directory.lookup import DirectoryLookup
from rag_pipeline.directory.people import find_person
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.directory.sync import DirectorySync, sync_directory
from rag_pipeline.index.store import IndexedAcl
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraSite
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import EMAIL_SCOPE, SlackWorkspace

TEAM, SITE = "T0BENCH001", "jira.bench.test"


def slack_workspace(users: int, private_channels: int, rng: random.Random) -> SlackWorkspace:
    ws = SlackWorkspace(team_id=TEAM, domain="bench.slack.com")
    ws.scopes.add(EMAIL_SCOPE)
    for n in range(users):
        roll = rng.random()
        ws.add_user(
            f"U{n:08d}", f"user{n}", email=f"user{n}@bench.example", deleted=roll < 0.02,
            is_bot=0.02 <= roll < 0.03, guest="multi" if 0.03 <= roll < 0.08 else None,
        )  # fmt: skip
    for n in range(20):
        ws.add_user(f"UEXT{n:05d}", f"partner{n}", email=f"p{n}@partner.example", team_id="T0PARTNER1")
    ids = [f"U{n:08d}" for n in range(users)]
    for c in range(private_channels):
        ws.add_channel(f"G{c:08d}", f"private-{c}", is_private=True, members=rng.sample(ids, rng.randint(5, 60)))
    for c in range(10):
        members = rng.sample(ids, 30) + [f"UEXT{rng.randrange(20):05d}" for _ in range(3)]
        ws.add_channel(f"C{c:08d}", f"shared-{c}", is_ext_shared=True, members=list(dict.fromkeys(members)))
    for c in range(40):
        ws.add_channel(f"CP{c:07d}", f"public-{c}", members=rng.sample(ids, 50))
    return ws


def jira_site(accounts: int, rng: random.Random) -> JiraSite:
    site = JiraSite()
    groups = [f"group-{g:02d}" for g in range(60)]
    for n in range(accounts):
        site.add_user(
            f"acc-{n:06d}", f"Account {n}", email=f"user{n}@bench.example" if n % 3 else None,
            active=rng.random() > 0.03, groups=rng.sample(groups, rng.randint(1, 4)),
        )  # fmt: skip
    for p in range(40):
        site.add_project(
            f"P{p:02d}", browse_groups=rng.sample(groups, 2),
            role_actors={"10002": {"name": "Developers", "groups": rng.sample(groups, 1),
                                   "users": [f"acc-{rng.randrange(accounts):06d}" for _ in range(2)]}},
        )  # fmt: skip
    for level in range(5):
        site.add_security_level(
            str(10001 + level), f"Level {level}", groups=rng.sample(groups, 1), users=[f"acc-{level:06d}"]
        )
    return site


def _timed_sync(snapshot_of: Any, store: DirectoryStore) -> tuple[DirectorySync, float, Counter[str]]:
    started = time.perf_counter()
    snapshot, calls = snapshot_of()
    done = sync_directory(snapshot, store, started=started)
    return done, time.perf_counter() - started, calls


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--slack-users", type=int, default=5000)
    parser.add_argument("--private-channels", type=int, default=200)
    parser.add_argument("--jira-accounts", type=int, default=2000)
    parser.add_argument("--lookups", type=int, default=300, help="whois / explain calls timed")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "directory_sync.json")
    args = parser.parse_args()
    rng = random.Random(33)
    result: dict[str, Any] = {"run": common.run_record(), "shape": vars(args) | {"out": str(args.out)}}
    workspace = slack_workspace(args.slack_users, args.private_channels, rng)
    site = jira_site(args.jira_accounts, rng)
    with tempfile.TemporaryDirectory() as tmp, SlackEmulator(workspace) as slack, JiraEmulator(site) as jira:
        store = DirectoryStore(Path(tmp) / "directory.sqlite")

        def slack_snapshot() -> tuple[Any, Counter[str]]:
            before = len(slack.calls())
            reader = SlackApiReader(build_web_client("xoxb-test-token", slack.base_url, stats=ApiStats()))
            snapshot = slack_directory.read_api_directory(reader)
            return snapshot, Counter(c.method for c in slack.calls()[before:])

        def jira_snapshot() -> tuple[Any, Counter[str]]:
            before = len(jira.requests)
            client = build_jira_client(jira.url, username="bot@example.com", api_token="jira-test-token",
                                       cloud=True, stats=ApiStats(), backoff_seconds=0)  # fmt: skip
            snapshot = jira_directory.read_api_directory(JiraApiReader(client, JiraSyncSettings(cloud=True, site=SITE)))
            calls = Counter(_endpoint(r.path.split("/rest/api/3/")[-1].split("?")[0]) for r in jira.requests[before:])
            return snapshot, calls

        runs: dict[str, Any] = {}
        for label in ("full", "incremental"):
            if label == "incremental":
                # Between the syncs: 5 people leave private channels, 5 join, 3 change Jira groups.
                with workspace.lock:
                    for c in range(5):
                        channel = workspace.channel(f"G{c:08d}")
                        channel.members.pop()
                        channel.members.append(f"U{args.slack_users - 1 - c:08d}")
                for n in range(3):
                    site.remove_from_group(
                        next(g for g, m in site.groups.items() if f"acc-{n:06d}" in m), f"acc-{n:06d}"
                    )
            for source, snapshot_of in (("slack", slack_snapshot), ("jira", jira_snapshot)):
                done, seconds, calls = _timed_sync(snapshot_of, store)
                runs[f"{source}_{label}"] = {
                    "seconds": round(seconds, 3),
                    "api_calls": sum(calls.values()),
                    "api_calls_by_endpoint": dict(sorted(calls.items())),
                    "accounts": done.accounts,
                    "people": done.people,
                    "memberships_changed": done.change.memberships_changed,
                    "channels_changed": len(done.change.channels),
                    "acl_lag_seconds": done.acl_lag_seconds,
                }
                print(f"{source} {label}: {runs[f'{source}_{label}']}", flush=True)
        result["syncs"] = runs

        emails = [f"user{n}@bench.example" for n in rng.sample(range(args.slack_users), args.lookups)]
        whois = []
        for email in emails:
            started = time.perf_counter()
            find_person(store, email).describe()
            whois.append(time.perf_counter() - started)
        channels = [f"G{c:08d}" for c in range(args.private_channels)]
        acls = {c: IndexedAcl(users=frozenset(workspace.channel(c).members)) for c in channels}
        explains = []
        for email in emails:
            channel = rng.choice(channels)
            started = time.perf_counter()
            explain(find_person(store, email), f"slack:{TEAM}:{channel}:1709251200.000100", acls[channel], store)
            explains.append(time.perf_counter() - started)
        lookup = DirectoryLookup(store.path)
        cold, warm = [], []
        for email in emails:
            started = time.perf_counter()
            lookup(email)
            cold.append(time.perf_counter() - started)
            started = time.perf_counter()
            lookup(email)
            warm.append(time.perf_counter() - started)
        result["latency"] = {
            "whois": common.latency_ms(whois),
            "explain_without_index_read": common.latency_ms(explains),
            "service_lookup_first": common.latency_ms(cold),
            "service_lookup_cached": common.latency_ms(warm),
        }
        result["directory_bytes"] = store.path.stat().st_size
        print(json.dumps(result["latency"], indent=2))
    common.write_json(args.out, result)
    print(f"written {args.out}")


def _endpoint(path: str) -> str:
    parts = path.split("/")
    if parts[0] in ("project", "issuesecurityschemes") and len(parts) > 1 and parts[1] not in ("search", "level"):
        return "/".join([parts[0], "{id}", *parts[2:3]])
    return path


if __name__ == "__main__":
    main()
