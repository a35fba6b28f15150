"""Live Jira connector benchmark: REST requests and wall time of a 90-day x 3-project backfill, Cloud and Server.

Everything runs against the Jira REST emulator (rag_pipeline_tests/kit/emulators/jira_api.py) on 127.0.0.1, serving
a synthetic site (kit/jira_fixtures.synthetic_site): the bundled Appcelerator issues' texts spread over PROJECTS x DAYS,
ISSUES_PER_DAY issues per project-day with COMMENTS comments each, plus one issue per project with a long comment
thread (--long-thread comments) so comment paging is exercised. Each "run" uses a fresh reader (its own client,
zone and ACL caches), as a Dagster run does. The real atlassian-python-api client sends every request.

For each mode (Cloud: /rest/api/3/search/jql with nextPageToken, ADF bodies; Server/Data Center: /rest/api/2/search
with startAt, wiki bodies):
  (a) daily runs: JiraApiReader.read_days(project, [day]) per project-day (what a daily/hourly schedule does);
  (b) one range read per project (a single-run backfill: Dagster's BackfillPolicy.single_run);
  (c) the range read with faults injected: 429 (Retry-After 0) on every 10th search request and a 503 and a dropped
      connection on comment pages — the documents must equal (b)'s;
  (d) the reconciliation listing: ids of every issue per project (fields=id, 1,000 per page).
Documents of (a), (b) and (c) are compared (same ids, same documents, same partition day); the script exits 1
after writing the results when they differ.
--with-dagster also runs the Cloud backfill through rag_pipeline.runs.live_sync.run_sync (the real Dagster chain,
embeddings included, reconciliation on) into a temporary data dir.

    .venv/bin/python -m bench.jira_sync [--projects 3] [--days 90] [--with-dagster] [--out bench/results/jira_sync.json]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench import common
from rag_pipeline.connectors.jira.api import JiraApiReader, JiraSyncSettings
from rag_pipeline.connectors.jira.client import build_jira_client, endpoint_of
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.document import Document
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraSite
from rag_pipeline_tests.kit.jira_fixtures import synthetic_project_key, synthetic_site

USER, TOKEN, PAT = "bot@example.com", "jira-test-token", "jira-test-pat"
SITE = "bench.atlassian.test"


@dataclass
class Backfill:
    """Documents and requests of one backfill scenario."""

    documents: dict[str, Document] = field(default_factory=dict)
    partition_days: dict[str, set[str]] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    problems: int = 0
    seconds: float = 0.0

    def summary(self, project_days: int) -> dict[str, Any]:
        total = sum(self.requests.values())
        return {
            "runs": self.runs,
            "http_requests": total,
            "requests_per_project_day": round(total / project_days, 2),
            "requests_by_endpoint": dict(sorted(self.requests.items())),
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "retries": dict(sorted(self.retries.items())),
            "documents": len(self.documents),
            "overlap_rereads": sum(len(days) - 1 for days in self.partition_days.values()),
            "problems": self.problems,
            "seconds": round(self.seconds, 2),
        }


def _reader(emulator: JiraEmulator, cloud: bool) -> JiraApiReader:
    auth = {"username": USER, "api_token": TOKEN} if cloud else {"personal_access_token": PAT}
    client = build_jira_client(emulator.url, cloud=cloud, stats=ApiStats(), backoff_seconds=0, **auth)
    return JiraApiReader(client, JiraSyncSettings(cloud=cloud, site=SITE))


def backfill(
    emulator: JiraEmulator, projects: Sequence[str], days: Sequence[str], cloud: bool, daily: bool
) -> Backfill:
    out = Backfill()
    runs = [(p, [d]) for p in projects for d in days] if daily else [(p, list(days)) for p in projects]
    started = time.perf_counter()
    for project, run_days in runs:
        reader = _reader(emulator, cloud)
        read = reader.read_days(project, run_days)
        out.runs += 1
        out.problems += len(read.problems)
        out.retries.update(reader.stats.retries)
        for doc in read.documents:
            # An issue re-read in the next day's overlap is the same version: the index keeps one copy.
            if doc.id in out.documents and out.documents[doc.id] != doc:
                raise AssertionError(f"{doc.id}: two different versions in one backfill")
            out.documents[doc.id] = doc
            out.partition_days.setdefault(doc.id, set()).add(read.partition_day[doc.id])
    out.seconds = time.perf_counter() - started
    out.requests = Counter(f"{r.method} {endpoint_of(r.path)}" for r in emulator.requests)
    out.statuses = Counter(r.status for r in emulator.requests)
    return out


def id_listing(emulator: JiraEmulator, projects: Sequence[str], cloud: bool) -> dict[str, Any]:
    reader = _reader(emulator, cloud)
    started = time.perf_counter()
    ids = {p: len(reader.issue_ids(p)) for p in projects}
    return {
        "issues": sum(ids.values()),
        "http_requests": reader.stats.api_calls,
        "requests_by_endpoint": dict(sorted(reader.stats.calls.items())),
        "seconds": round(time.perf_counter() - started, 2),
    }


def compare(a: Backfill, b: Backfill) -> dict[str, Any]:
    same_ids = set(a.documents) == set(b.documents)
    differing = sorted(d for d in set(a.documents) & set(b.documents) if a.documents[d] != b.documents[d])
    # Each document must sit in the partition of its own `updated` day in both (overlap copies aside).
    days = sorted(
        d
        for d in set(a.documents) & set(b.documents)
        if a.documents[d].day not in a.partition_days[d] or b.documents[d].day not in b.partition_days[d]
    )
    return {
        "identical": same_ids and not differing and not days,
        "only_in_first": len(set(a.documents) - set(b.documents)),
        "only_in_second": len(set(b.documents) - set(a.documents)),
        "documents_differing": len(differing),
        "documents_outside_their_day": len(days),
    }


def add_long_threads(site: JiraSite, projects: Sequence[str], comments: int, day: str) -> int:
    """One issue per project gets ``comments`` extra comments (comment paging past what search embeds)."""
    added = 0
    for project in projects:
        issue = next(i for i in site.issues.values() if i["fields"]["project"]["key"] == project)
        thread = issue["fields"]["comment"]["comments"]
        author = (thread[0] if thread else {}).get("author") or {"accountId": "acc-bench", "displayName": "Bench"}
        for n in range(comments):
            stamp = f"{day}T12:{n // 60:02d}:{n % 60:02d}.000+0000"
            thread.append({"id": f"9{added:07d}", "author": author, "body": f"follow-up {n}", "created": stamp,
                           "updated": stamp})  # fmt: skip
            added += 1
        issue["fields"]["comment"]["total"] = len(thread)
    return added


def dagster_backfill(site: JiraSite, start: str, end: str) -> dict[str, Any]:
    from rag_pipeline.defs.jira.resources import JiraResource
    from rag_pipeline.runs.live_sync import run_sync
    from rag_pipeline.settings import Settings

    with JiraEmulator(site) as emulator, tempfile.TemporaryDirectory(prefix="jira_bench_") as tmp:
        os.environ["DAGSTER_HOME"] = str(Path(tmp) / "dagster_home")  # never the user's instance
        jira = JiraResource(url=emulator.url, username=USER, api_token=TOKEN, site=SITE, backoff_seconds=0)
        started = time.perf_counter()
        summary = run_sync(Settings.from_env().with_data_dir(tmp), "jira", start, end, resource=jira, reconcile=True)
        return {
            "seconds": round(time.perf_counter() - started, 2),
            "summary": summary.as_dict(),
            "http_requests": len(emulator.requests),
        }


def markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    lines = [
        "# Live Jira connector: backfill requests and wall time",
        "",
        f"Synthetic site: {cfg['projects']} projects x {cfg['days']} days x {cfg['issues_per_day']} issues/day "
        f"({report['site']['issues']} issues, {report['site']['comments']} comments; one {cfg['long_thread']}-comment "
        "thread per project), Jira REST emulator on 127.0.0.1, real atlassian-python-api client.",
        "",
        "| mode | scenario | runs | HTTP requests | requests / project-day | retries | documents | overlap re-reads "
        "| wall s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    labels = {"a_daily": "(a) daily runs", "b_range": "(b) one range read per project",
              "c_range_faults": "(c) range read, faults injected"}  # fmt: skip
    for mode, scenarios in report["modes"].items():
        for key, label in labels.items():
            s = scenarios[key]
            lines.append(
                f"| {mode} | {label} | {s['runs']} | {s['http_requests']} | {s['requests_per_project_day']} | "
                f"{sum(s['retries'].values())} | {s['documents']} | {s['overlap_rereads']} | {s['seconds']} |"
            )
    lines += ["", "Requests by endpoint, range read:", ""]
    for mode, scenarios in report["modes"].items():
        by = ", ".join(f"`{k}` {v}" for k, v in scenarios["b_range"]["requests_by_endpoint"].items())
        lines.append(f"- {mode}: {by}")
    lines += ["", "Reconciliation id listing (ids only, 1,000 per page):", ""]
    for mode, scenarios in report["modes"].items():
        s = scenarios["d_id_listing"]
        lines.append(f"- {mode}: {s['issues']} ids in {s['http_requests']} requests, {s['seconds']} s")
    lines += ["", "Documents identical across scenarios:", ""]
    for mode, scenarios in report["modes"].items():
        lines.append(
            f"- {mode}: daily vs range {'yes' if scenarios['a_vs_b']['identical'] else 'NO'}, "
            f"faults vs range {'yes' if scenarios['c_vs_b']['identical'] else 'NO'}"
        )
    if report.get("dagster"):
        d = report["dagster"]
        lines += [
            "",
            "## Through run_sync (Dagster chain, embeddings, reconciliation), Cloud",
            "",
            f"{d['seconds']} s, {d['http_requests']} HTTP requests; summary: `{json.dumps(d['summary'])}`",
        ]
    lines += ["", f"Command: `{report['command']}`", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--projects", type=int, default=3, help="synthetic projects (default 3)")
    parser.add_argument("--days", type=int, default=90, help="synthetic days, all backfilled (default 90)")
    parser.add_argument("--issues-per-day", type=int, default=4, help="issues per project-day (default 4)")
    parser.add_argument("--comments", type=int, default=3, help="comments per issue (default 3)")
    parser.add_argument("--long-thread", type=int, default=250, help="comments of one issue per project (default 250)")
    parser.add_argument("--start", default="2024-01-01", help="first day (UTC, default 2024-01-01)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic site seed (default 0)")
    parser.add_argument("--with-dagster", action="store_true", help="also backfill through run_sync (slow)")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "jira_sync.json", help="JSON (+ .md)")
    args = parser.parse_args(argv)

    first = date.fromisoformat(args.start)
    days = [(first + timedelta(days=i)).isoformat() for i in range(args.days)]
    projects = [synthetic_project_key(i) for i in range(args.projects)]

    def site() -> JiraSite:
        built = synthetic_site(args.projects, args.days, args.issues_per_day, args.start, args.comments, args.seed)
        add_long_threads(built, projects, args.long_thread, days[len(days) // 2])
        return built

    sample = site()
    report: dict[str, Any] = {
        "command": common.command_line(argv),
        "config": {
            "projects": args.projects,
            "days": args.days,
            "issues_per_day": args.issues_per_day,
            "comments": args.comments,
            "long_thread": args.long_thread,
            "start": args.start,
            "seed": args.seed,
        },
        "environment": {
            **common.machine(),
            "atlassian_python_api": version("atlassian-python-api"),
            "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "site": {
            "issues": len(sample.issues),
            "comments": sum(len(i["fields"]["comment"]["comments"]) for i in sample.issues.values()),
        },
        "modes": {},
    }
    project_days = len(projects) * len(days)
    ok = True
    for mode, cloud in (("cloud", True), ("server", False)):
        runs: dict[str, Backfill] = {}
        for key, daily in (("a_daily", True), ("b_range", False)):
            with JiraEmulator(site(), cloud=cloud) as emulator:
                runs[key] = backfill(emulator, projects, days, cloud, daily)
            print(f"{mode} {key}: {runs[key].seconds:.1f} s", file=sys.stderr)
        with JiraEmulator(site(), cloud=cloud) as emulator:
            search = "/search/jql" if cloud else "/search"
            emulator.inject("429", path=search, times=max(1, len(projects) * 2), retry_after=0)
            emulator.inject("503", path="/comment", times=2)
            emulator.inject("drop", path="/comment", times=1)
            runs["c_range_faults"] = backfill(emulator, projects, days, cloud, daily=False)
        with JiraEmulator(site(), cloud=cloud) as emulator:
            listing = id_listing(emulator, projects, cloud)
        scenarios: dict[str, Any] = {key: run.summary(project_days) for key, run in runs.items()}
        scenarios["d_id_listing"] = listing
        scenarios["a_vs_b"] = compare(runs["a_daily"], runs["b_range"])
        scenarios["c_vs_b"] = compare(runs["c_range_faults"], runs["b_range"])
        ok = ok and scenarios["a_vs_b"]["identical"] and scenarios["c_vs_b"]["identical"]
        report["modes"][mode] = scenarios
    if args.with_dagster:
        report["dagster"] = dagster_backfill(site(), days[0], days[-1])
        print(f"run_sync: {report['dagster']['seconds']} s", file=sys.stderr)

    common.write_json(args.out, report)
    md = markdown(report)
    args.out.with_suffix(".md").write_text(md)
    print(md)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
