"""A simulated week of the scheduled sync, tick by tick on a fake clock, against the Slack and Jira emulators.

One copy of the simulation, used by ``dagster/test_sync_week.py`` and ``bench/sync_week.py``:

* :class:`Scenario` says what happens: the week's start, the crons, the Slack regime (page size and so the
  planner's request budget), a daemon outage, a channel and a project created mid-week with history.
* :func:`build_changes` draws (seeded) what the people do: Slack roots, replies, root edits, and the changes only
  the daily reconciliation sees (reply edits, reply deletions, deleted roots, tombstoned roots); Jira issue
  creations and updates (summary, description, comments); many at 23:00-23:59:59. The emulators have no clock:
  :class:`World` applies each change when the fake clock passes its instant.
* :class:`SyncWeek` runs the daemon on the fake clock: at each cron tick (plus the sensor's evaluation delay)
  each source's discovery sensor, then its sync sensor, then every run it requested, executed in-process (a
  capped range is followed by another evaluation 30 s later, as the daemon's sensor loop would); at each
  reconciliation schedule's cron instant the reconciliation job. Nothing runs during the outage. It records the
  planned runs, the gap check of every run, the API calls per tick and, with ``track_lag``, the first daemon
  action after which each change is in the index.
* :func:`fresh_sync` syncs the same emulator state into a second data folder and instance (one initial-history
  range per container, no budget), and :func:`compare_indexes` compares the two indexes document by document
  (ids, content hashes, versions, points per document).

The week is placed relative to the real date (it ends days before today): the day partitions end at the real
today, and the Slack reconciliation's lookback (threads re-read for deleted replies and quiet edits) is counted
from the real clock (``slack_reconcile.plan_channel`` is not given the fake one), so the week must lie within
it.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._utils.schedules import cron_string_iterator

from rag_pipeline.connectors.jira.dump import issue_document_id
from rag_pipeline.connectors.slack.threads import thread_document_id
from rag_pipeline.defs.chain.resources import qdrant_resource
from rag_pipeline.index.store import IndexedDocument, SearchFilter
from rag_pipeline.pipeline.tags import ESTIMATED_REQUESTS_TAG, PLANNED_AT_TAG, SOURCE_TAG
from rag_pipeline.runs.sync_runs import cron_window
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraSite, parse_jira_time
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace
from rag_pipeline_tests.kit.sync_harness import SyncHarness, container_results, plan_of

SLACK_TOKEN = "xoxb-sync-week"
JIRA_USER, JIRA_TOKEN = "bot@example.com", "jira-test-token"
JIRA_SITE = "jira.simweek.test"
TEAM, DOMAIN = "T0SIMWEEK", "simweek.slack.com"
GENERAL, LAUNCH = "C0SIMGEN01", "C0SIMLNC01"  # the channel from the start, the one created mid-week
OPS, NEWP = "OPS", "NEWP"  # the project from the start, the one created mid-week
USERS = (
    ("U0SIMALICE", "alice", "Alice Anders"),
    ("U0SIMBOB01", "bob", "Bob Brown"),
    ("U0SIMCAROL", "carol", "Carol Chen"),
)
PEOPLE = tuple({"accountId": f"acc-{n}", "displayName": r, "emailAddress": f"{n}@example.com"} for _, n, r in USERS)

# What the daily reconciliation catches and the sync does not (a deletion leaves no timestamp, a reply edit
# does not move its root's latest_reply).
RECONCILED_KINDS = frozenset({"reply_edit", "reply_delete", "root_delete", "tombstone"})
# A range capped at max_range_days is followed by the next one as soon as it succeeds: evaluated again this soon.
REEVALUATE_AFTER = timedelta(seconds=30)
MAX_EVALUATIONS_PER_TICK = 10


def default_start(today: datetime | None = None, days_before_today: int = 12) -> datetime:
    """Midnight UTC ``days_before_today`` days before today: a week from it ends days before the real today and
    lies within the Slack reconciliation's 30-day lookback, which counts from the real clock."""
    now = today or datetime.now(UTC)
    return datetime(now.year, now.month, now.day, tzinfo=UTC) - timedelta(days=days_before_today)


@dataclass(frozen=True)
class Scenario:
    """What happens in the simulated week."""

    start: datetime = field(default_factory=default_start)  # midnight UTC: the daemon's first tick
    days: int = 7
    tail: timedelta = timedelta(hours=4)  # after the week: the last reconciliation (03:00/03:30) and ticks
    seed: int = 12
    sources: tuple[str, ...] = ("slack", "jira")
    slack_page_size: int = 15  # 15: the non-Marketplace regime (1 request/minute); 200: Tier 3 (50/minute)
    slack_cron: str = "0 * * * *"
    jira_cron: str = "0 * * * *"
    # (offset from start, length) of the daemon outage; None: no outage.
    outage: tuple[timedelta, timedelta] | None = (timedelta(days=4, hours=20), timedelta(hours=36))
    new_containers_at: timedelta = timedelta(days=3, hours=14, minutes=20)
    history_days: int = 60  # the history the channel and the project created mid-week come with
    pre_history_days: int = 3  # the history of the containers that exist from the start
    initial_history_days: int = 70  # SLACK/JIRA_INITIAL_HISTORY_DAYS: covers the 60 days of history
    evaluation_delay: timedelta = timedelta(seconds=30)  # the sync sensor's evaluation after a cron tick
    activity: float = 1.0  # scales how many changes per day

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=self.days) + self.tail

    @property
    def new_at(self) -> datetime:
        return self.start + self.new_containers_at

    @property
    def outage_window(self) -> tuple[datetime, datetime] | None:
        if self.outage is None:
            return None
        return self.start + self.outage[0], self.start + self.outage[0] + self.outage[1]

    @property
    def partition_start(self) -> str:
        """The first partition day: just before the oldest history (a short date dimension keeps runs cheap)."""
        oldest = min(
            self.start - timedelta(days=self.pre_history_days), self.new_at - timedelta(days=self.history_days)
        )
        return (oldest - timedelta(days=2)).date().isoformat()

    def in_outage(self, instant: datetime) -> bool:
        window = self.outage_window
        return window is not None and window[0] <= instant < window[1]

    def cron(self, source: str) -> str:
        return self.slack_cron if source == "slack" else self.jira_cron


# -- what people do ----------------------------------------------------------------------------------------------


@dataclass
class Expectation:
    """What the index must show once a change is synced: the document with at least ``min_version``
    (``version``), without it (``absent``), or other than it was when the change happened (``changed``)."""

    source: str
    container: str
    kind: str
    doc_id: str
    visible_at: datetime  # from when the daemon could see it (a container's history: the container's creation)
    expect: str
    min_version: float = 0.0
    baseline: IndexedDocument | None = None  # "changed": the indexed document when the change happened
    indexed_at: datetime | None = None
    indexed_by: str | None = None  # "tick" or "reconcile"
    lag_ticks: int | None = None

    @property
    def reconciled_kind(self) -> bool:
        return self.kind in RECONCILED_KINDS


@dataclass
class Change:
    """One thing a person does at ``at`` (a container's creation applies its whole history at once)."""

    at: datetime
    source: str
    container: str
    kind: str
    apply: Callable[[World], None]
    expectations: list[Expectation] = field(default_factory=list)
    seq: int = 0


@dataclass
class _Root:
    channel: str
    ts: str
    at: datetime
    replies: list[_Reply] = field(default_factory=list)
    alive: bool = True
    tombstoned: bool = False


@dataclass
class _Reply:
    root: _Root
    ts: str
    at: datetime
    alive: bool = True


@dataclass
class _Issue:
    project: str
    issue_id: str
    key: str
    updated: datetime


VOCABULARY = (
    "deploy rollback cluster latency alert dashboard migration schema index cache queue worker release "
    "branch review incident postmortem runbook database replica backup restore certificate token "
    "rotation quota budget capacity autoscaler gateway timeout retry webhook scheduler cron partition "
    "backfill watermark checkpoint metrics tracing logging sampling canary feature flag experiment "
    "rollout hotfix patch upgrade kernel driver firmware network subnet firewall proxy resolver mirror "
    "artifact registry pipeline build test flaky "
)
WORDS = tuple(VOCABULARY.split())


def _sentence(rng: random.Random, tag: str) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 14))]
    return f"{' '.join(words).capitalize()} ({tag})."


def _ts(instant: datetime) -> str:
    return f"{instant.timestamp():.6f}"


def _jira_time(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}+0000"


def _ms(instant: datetime) -> datetime:
    return instant.replace(microsecond=instant.microsecond // 1000 * 1000)


def _draw(rng: random.Random, lo: datetime, hi: datetime, late_share: float = 0.3) -> datetime:
    """An instant in [lo, hi): with ``late_share`` probability within 23:00-23:59:59 of one of its days."""
    span = (hi - lo).total_seconds()
    for _ in range(100):
        if rng.random() < late_share:
            day = (lo + timedelta(seconds=rng.uniform(0, span))).replace(hour=23, minute=0, second=0, microsecond=0)
            instant = day + timedelta(seconds=rng.uniform(0, 3599.999))
        else:
            instant = lo + timedelta(seconds=rng.uniform(0, span))
        if lo <= instant < hi:
            return instant
    return lo + timedelta(seconds=rng.uniform(0, span))


class _Generator:
    """Draws the week's changes in time order, each one's target chosen from the state at its instant."""

    def __init__(self, scenario: Scenario) -> None:
        self.s = scenario
        self.rng = random.Random(scenario.seed)
        self.changes: list[Change] = []
        self.used_ts: set[str] = set()
        self.roots: list[_Root] = []
        self.issues: list[_Issue] = []
        self.next_issue_id = 700001
        self.next_comment_id = 900001
        self.issue_numbers: Counter[str] = Counter()
        # Sync-visible changes stop early enough that the last ticks index them; reconciliation-only ones before
        # the week's last reconciliation.
        self.sync_cutoff = scenario.end - timedelta(hours=2, minutes=1)
        self.reconcile_cutoff = scenario.start + timedelta(days=scenario.days)

    def count(self, per_day: float, days: float) -> int:
        return max(0, round(per_day * days * self.s.activity))

    def unique(self, instant: datetime) -> datetime:
        while _ts(instant) in self.used_ts:
            instant += timedelta(microseconds=1)
        self.used_ts.add(_ts(instant))
        return instant

    def add(self, change: Change) -> None:
        change.seq = len(self.changes)
        self.changes.append(change)

    # -- Slack ------------------------------------------------------------------------------------------------

    def slack(self) -> None:
        s, rng = self.s, self.rng
        start, new_at = s.start, s.new_at
        created_general = start - timedelta(days=s.pre_history_days, hours=1)
        self.slack_channel(GENERAL, "general", created_general, start, start - timedelta(days=s.pre_history_days), 4)
        self.slack_channel(LAUNCH, "launch", new_at, new_at, new_at - timedelta(days=s.history_days), 10)
        intents: list[tuple[datetime, str, str]] = []
        week = (self.sync_cutoff - start).total_seconds() / 86400
        after = (self.sync_cutoff - new_at).total_seconds() / 86400
        for channel, lo, days, roots, replies, edits in (
            (GENERAL, start, week, 2.0, 3.0, 0.6),
            (LAUNCH, new_at + timedelta(minutes=1), after, 1.0, 1.5, 0.3),
        ):
            for kind, per_day in (("root", roots), ("reply", replies), ("root_edit", edits)):
                intents += [(_draw(rng, lo, self.sync_cutoff), kind, channel) for _ in range(self.count(per_day, days))]
        # What only the reconciliation sees: before the week's last reconciliation, from the second hour.
        for kind, n in (("reply_edit", 2), ("reply_delete", 2), ("root_delete", 2), ("tombstone", 1)):
            for _ in range(n):
                lo = start + timedelta(hours=1)
                intents.append((_draw(rng, lo, self.reconcile_cutoff), kind, GENERAL))
        intents.append((_draw(rng, new_at + timedelta(hours=2), self.reconcile_cutoff), "reply_delete", LAUNCH))
        for instant, kind, channel in sorted(intents):
            self.slack_change(self.unique(instant), kind, channel)

    def slack_channel(
        self, channel: str, name: str, created: datetime, visible: datetime, history_from: datetime, roots: int
    ) -> None:
        """A channel that appears at ``created`` with ``roots`` threads posted since ``history_from``."""
        rng = self.rng
        messages: list[dict[str, Any]] = []
        expectations: list[Expectation] = []
        for _ in range(roots):
            at = self.unique(_draw(rng, history_from, created - timedelta(hours=6)))
            root = _Root(channel, _ts(at), at)
            self.roots.append(root)
            messages.append(self.message(root.ts, f"{channel} history root"))
            last = at
            for _ in range(rng.choice((0, 0, 1, 2))):
                candidate = last + timedelta(minutes=rng.uniform(5, 300))
                if candidate >= created:
                    break  # not posted: the history ends at the channel's creation
                last = self.unique(candidate)
                reply = _Reply(root, _ts(last), last)
                root.replies.append(reply)
                messages.append(self.message(reply.ts, f"{channel} history reply", thread_ts=root.ts))
            expectations.append(self.slack_expect(channel, "history", root.ts, visible, float(_ts(last))))

        def apply(world: World) -> None:
            world.workspace.add_channel(
                channel, name, members=[u for u, _, _ in USERS], created=int(created.timestamp()), purpose=name
            )
            for message in sorted(messages, key=lambda m: float(m["ts"])):
                world.workspace.post(channel, message)

        self.add(Change(created, "slack", channel, "container", apply, expectations))

    def message(self, ts: str, tag: str, thread_ts: str | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"ts": ts, "user": self.rng.choice(USERS)[0], "text": _sentence(self.rng, tag)}
        if thread_ts is not None:
            message["thread_ts"] = thread_ts
        return message

    def slack_expect(
        self,
        channel: str,
        kind: str,
        root_ts: str,
        visible: datetime,
        min_version: float = 0.0,
        expect: str = "version",
    ) -> Expectation:
        doc_id = thread_document_id(TEAM, channel, root_ts)
        return Expectation("slack", channel, kind, doc_id, visible, expect, min_version)

    def slack_add(
        self, at: datetime, kind: str, channel: str, apply: Callable[[World], None], root_ts: str, expect: str
    ) -> None:
        min_version = float(_ts(at)) if expect == "version" else 0.0
        expectation = self.slack_expect(channel, kind, root_ts, at, min_version, expect)
        self.add(Change(at, "slack", channel, kind, apply, [expectation]))

    def indexed_between(self, source: str, since: datetime, until: datetime) -> bool:
        """Whether the daemon evaluated a tick between two instants (so a change's target was indexed before it)."""
        evaluation = first_nominal_evaluation(self.s, source, since + timedelta(seconds=1))
        while evaluation < until:
            if not self.s.in_outage(evaluation):
                return evaluation < until
            evaluation = first_nominal_evaluation(self.s, source, evaluation + timedelta(seconds=1))
        return False

    def slack_change(self, at: datetime, kind: str, channel: str) -> None:
        rng = self.rng
        live = [r for r in self.roots if r.channel == channel and r.alive and not r.tombstoned and r.at < at]
        recent = [r for r in live if r.at >= at - timedelta(days=4)]
        ts = _ts(at)
        if kind == "reply" and recent:
            root = rng.choice(recent)
            root.replies.append(_Reply(root, ts, at))
            self.slack_add(at, kind, channel, _post(channel, self.message(ts, "reply", root.ts)), root.ts, "version")
            return
        if kind == "root_edit" and recent:
            root = rng.choice(recent)
            edit = _edit(channel, root.ts, _sentence(rng, "edited root"), ts)
            self.slack_add(at, kind, channel, edit, root.ts, "version")
            return
        # What only the reconciliation sees changes messages the index already holds.
        settled = [r for r in recent if self.indexed_between("slack", r.at, at)]
        replies = [p for r in settled for p in r.replies if p.alive and self.indexed_between("slack", p.at, at)]
        if kind == "reply_edit" and replies:
            reply = rng.choice(replies)
            edit = _edit(channel, reply.ts, _sentence(rng, "edited reply"), ts)
            self.slack_add(at, kind, channel, edit, reply.root.ts, "version")
            return
        if kind == "reply_delete" and replies:
            reply = rng.choice(replies)
            reply.alive = False
            self.slack_add(at, kind, channel, _delete(channel, reply.ts), reply.root.ts, "changed")
            return
        quiet = [r for r in settled if not any(p.alive for p in r.replies)]
        if kind == "root_delete" and quiet:
            root = rng.choice(quiet)
            root.alive = False
            self.slack_add(at, kind, channel, _delete(channel, root.ts), root.ts, "absent")
            return
        busy = [r for r in settled if any(p.alive for p in r.replies)]
        if kind == "tombstone" and busy:
            root = rng.choice(busy)
            root.tombstoned = True
            self.slack_add(at, kind, channel, _delete(channel, root.ts), root.ts, "changed")
            return
        if kind in RECONCILED_KINDS:
            return  # nothing the index holds to change yet
        # A root (also what a reply or an edit becomes when there is nothing recent to reply to or edit).
        self.roots.append(_Root(channel, ts, at))
        self.slack_add(at, "root", channel, _post(channel, self.message(ts, "root")), ts, "version")

    # -- Jira -------------------------------------------------------------------------------------------------

    def jira(self) -> None:
        s, rng = self.s, self.rng
        start, new_at = s.start, s.new_at + timedelta(minutes=20)
        self.jira_project(OPS, "Operations", "12001", start - timedelta(days=s.pre_history_days, hours=1), start, 4)
        hist_from = new_at - timedelta(days=s.history_days)
        self.jira_project(NEWP, "New Platform", "12002", new_at, new_at, 10, history_from=hist_from)
        intents: list[tuple[datetime, str, str]] = []
        week = (self.sync_cutoff - start).total_seconds() / 86400
        after = (self.sync_cutoff - new_at).total_seconds() / 86400
        for project, lo, days, creates, updates in (
            (OPS, start, week, 2.0, 2.0),
            (NEWP, new_at + timedelta(minutes=1), after, 1.0, 1.0),
        ):
            for kind, per_day in (("issue", creates), ("issue_update", updates)):
                intents += [(_draw(rng, lo, self.sync_cutoff), kind, project) for _ in range(self.count(per_day, days))]
        for instant, kind, project in sorted(intents):
            self.jira_change(_ms(instant), kind, project)

    def jira_project(
        self,
        key: str,
        name: str,
        project_id: str,
        created: datetime,
        visible: datetime,
        issues: int,
        history_from: datetime | None = None,
    ) -> None:
        rng = self.rng
        lo = history_from or created - timedelta(days=self.s.pre_history_days)
        stored: list[dict[str, Any]] = []
        expectations: list[Expectation] = []
        for opened in sorted(_ms(_draw(rng, lo, created - timedelta(hours=6))) for _ in range(issues)):
            updated = _ms(min(opened + timedelta(hours=rng.uniform(0, 30)), created - timedelta(hours=1)))
            issue = self.new_issue(key, name, opened, max(opened, updated), comments=rng.choice((0, 1, 2)))
            stored.append(issue)
            expectations.append(self.jira_expect(key, "history", issue["id"], visible, issue["fields"]["updated"]))

        def apply(world: World) -> None:
            world.site.add_project(key, name, project_id=project_id)
            for issue in stored:
                world.site.add_issue(issue)

        self.add(Change(created, "jira", key, "container", apply, expectations))

    def new_issue(self, project: str, name: str, opened: datetime, updated: datetime, comments: int) -> dict[str, Any]:
        rng = self.rng
        issue_id = str(self.next_issue_id)
        self.next_issue_id += 1
        self.issue_numbers[project] += 1
        key = f"{project}-{self.issue_numbers[project]}"
        reporter = rng.choice(PEOPLE)
        body = [self.comment(opened + (updated - opened) * (i + 1) / (comments + 1)) for i in range(comments)]
        fields: dict[str, Any] = {
            "project": {"key": project, "name": name},
            "summary": _sentence(rng, f"{key} summary")[:120],
            "description": _sentence(rng, f"{key} description") + "\n\n" + _sentence(rng, "details"),
            "created": _jira_time(opened),
            "updated": _jira_time(updated),
            "reporter": dict(reporter),
            "creator": dict(reporter),
            "assignee": dict(rng.choice(PEOPLE)),
            "issuetype": {"id": "10002", "name": "Task"},
            "status": {"id": "1", "name": "Open"},
            "priority": {"id": "3", "name": "Major"},
            "resolution": None,
            "labels": [],
            "components": [],
            "issuelinks": [],
            "subtasks": [],
            "attachment": [],
            "environment": None,
            "comment": {"comments": body, "maxResults": len(body), "total": len(body), "startAt": 0},
        }
        self.issues.append(_Issue(project, issue_id, key, updated))
        return {"id": issue_id, "key": key, "fields": fields}

    def comment(self, at: datetime) -> dict[str, Any]:
        author = dict(self.rng.choice(PEOPLE))
        comment_id = str(self.next_comment_id)
        self.next_comment_id += 1
        when = _jira_time(_ms(at))
        body = _sentence(self.rng, f"comment {comment_id}")
        return {"id": comment_id, "author": author, "body": body, "created": when, "updated": when}

    def jira_expect(self, project: str, kind: str, issue_id: str, visible: datetime, updated: str) -> Expectation:
        doc_id = issue_document_id(JIRA_SITE, issue_id)
        return Expectation("jira", project, kind, doc_id, visible, "version", parse_jira_time(updated).timestamp())

    def jira_change(self, at: datetime, kind: str, project: str) -> None:
        name = "Operations" if project == OPS else "New Platform"
        existing = [i for i in self.issues if i.project == project and i.updated < at]
        if kind == "issue_update" and existing:
            target = self.rng.choice(existing)
            target.updated = at
            comment = self.comment(at) if self.rng.random() < 0.5 else None
            text = _sentence(self.rng, f"{target.key} rewritten")
            expectation = self.jira_expect(project, kind, target.issue_id, at, _jira_time(at))
            self.add(
                Change(at, "jira", project, kind, _update_issue(target.issue_id, at, comment, text), [expectation])
            )
            return
        issue = self.new_issue(project, name, at, at, comments=0)
        expectation = self.jira_expect(project, "issue", issue["id"], at, issue["fields"]["updated"])
        self.add(Change(at, "jira", project, "issue", _add_issue(issue), [expectation]))


def _post(channel: str, message: dict[str, Any]) -> Callable[[World], None]:
    def apply(world: World) -> None:
        world.workspace.post(channel, message)

    return apply


def _edit(channel: str, ts: str, text: str, edited_ts: str) -> Callable[[World], None]:
    return lambda world: world.workspace.edit(channel, ts, text, edited_ts)


def _delete(channel: str, ts: str) -> Callable[[World], None]:
    return lambda world: world.workspace.delete(channel, ts)


def _add_issue(issue: dict[str, Any]) -> Callable[[World], None]:
    return lambda world: world.site.add_issue(issue)


def _update_issue(issue_id: str, at: datetime, comment: dict[str, Any] | None, text: str) -> Callable[[World], None]:
    def apply(world: World) -> None:
        with world.site.lock:
            fields = world.site.issues[issue_id]["fields"]
            fields["updated"] = _jira_time(at)
            if comment is not None:
                comments = fields["comment"]["comments"]
                comments.append(dict(comment))
                fields["comment"].update(maxResults=len(comments), total=len(comments))
            else:
                fields["description"] = text

    return apply


def build_changes(scenario: Scenario) -> list[Change]:
    """Every change of the week (containers with their history included), in time order."""
    generator = _Generator(scenario)
    if "slack" in scenario.sources:
        generator.slack()
    if "jira" in scenario.sources:
        generator.jira()
    return sorted(generator.changes, key=lambda c: (c.at, c.seq))


class World:
    """The emulators' state, moved forward with the fake clock: a change is applied once its instant passed."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.workspace = SlackWorkspace(
            team_id=TEAM,
            domain=DOMAIN,
            users=[{"id": uid, "name": name, "real_name": real} for uid, name, real in USERS],
        )
        self.site = JiraSite(user_timezone="America/Los_Angeles", account_id="acc-rag-bot", display_name="RAG Bot")
        self.changes = build_changes(scenario)
        self.applied: list[Change] = []
        self._next = 0

    def advance(self, until: datetime) -> list[Change]:
        """Apply every change up to ``until`` (inclusive); returns them."""
        done = []
        while self._next < len(self.changes) and self.changes[self._next].at <= until:
            change = self.changes[self._next]
            change.apply(self)
            done.append(change)
            self._next += 1
        self.applied.extend(done)
        return done

    @property
    def expectations(self) -> list[Expectation]:
        return [e for c in self.applied for e in c.expectations]


# -- the daemon on the fake clock ---------------------------------------------------------------------------------


@contextlib.contextmanager
def emulators(scenario: Scenario, world: World) -> Iterator[tuple[SlackEmulator | None, JiraEmulator | None]]:
    """The emulators serving ``world``, and the API tokens in the environment (the resources read them as
    EnvVars inside runs)."""
    saved = {name: os.environ.get(name) for name in ("SLACK_BOT_TOKEN", "JIRA_API_TOKEN")}
    os.environ["SLACK_BOT_TOKEN"], os.environ["JIRA_API_TOKEN"] = SLACK_TOKEN, JIRA_TOKEN
    try:
        with contextlib.ExitStack() as stack:
            slack = jira = None
            if "slack" in scenario.sources:
                page = scenario.slack_page_size
                slack = stack.enter_context(SlackEmulator(world.workspace, max_limit=page, token=SLACK_TOKEN))
            if "jira" in scenario.sources:
                jira = stack.enter_context(JiraEmulator(world.site, username=JIRA_USER, api_token=JIRA_TOKEN))
            yield slack, jira
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def scenario_env(
    scenario: Scenario,
    data_dir: Path,
    slack: SlackEmulator | None,
    jira: JiraEmulator | None,
    **overrides: str,
) -> dict[str, str]:
    """The configuration variables of the simulated deployment (``overrides`` win)."""
    env = {
        "RAG_DATA_DIR": str(data_dir),
        "RAG_PARTITION_START": scenario.partition_start,
        "SLACK_INITIAL_HISTORY_DAYS": str(scenario.initial_history_days),
        "JIRA_INITIAL_HISTORY_DAYS": str(scenario.initial_history_days),
        "SLACK_SYNC_CRON": scenario.slack_cron,
        "JIRA_SYNC_CRON": scenario.jira_cron,
    }
    if slack is not None:
        env.update(SLACK_BOT_TOKEN=SLACK_TOKEN, SLACK_API_BASE_URL=slack.base_url)
        env["SLACK_PAGE_SIZE"] = str(scenario.slack_page_size)
    if jira is not None:
        env.update(JIRA_URL=jira.url, JIRA_USERNAME=JIRA_USER, JIRA_API_TOKEN=JIRA_TOKEN, JIRA_SITE=JIRA_SITE)
    env.update(overrides)
    return env


@dataclass
class RunRecord:
    """One executed sync run."""

    source: str
    container: str
    reason: str
    planned_at: datetime
    synced_through: datetime
    estimated_requests: int
    success: bool
    gap_check_passed: bool | None  # None: the check did not run


@dataclass
class TickRecord:
    """One sensor tick of one source (discovery, sync sensor, the runs it requested)."""

    source: str
    tick: datetime
    evaluations: int
    runs: int
    api_calls: int
    calls_by_method: dict[str, int]


@dataclass
class ReconcileRecord:
    source: str
    at: datetime
    success: bool
    api_calls: int


@dataclass
class WeekResult:
    """What happened in a simulated week."""

    scenario: Scenario
    runs: list[RunRecord] = field(default_factory=list)
    ticks: list[TickRecord] = field(default_factory=list)
    reconciliations: list[ReconcileRecord] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)
    container_days: dict[str, float] = field(default_factory=dict)  # per source: containers x days they existed
    seconds: float = 0.0

    def runs_of(self, source: str) -> list[RunRecord]:
        return [r for r in self.runs if r.source == source]


class _Source:
    """One source's daemon parts: the harness (discovery sensor, sync sensor, reconciliation job) and its calls."""

    def __init__(self, source: str, settings: Settings, instance: dg.DagsterInstance, emulator: Any, now: datetime):
        self.source = source
        self.harness = SyncHarness(settings, source, instance, now=now)
        self.emulator = emulator
        schedule = self.harness.defs.resolve_schedule_def(self.harness.spec.live.schedule.name)
        cron = schedule.cron_schedule
        assert isinstance(cron, str)
        self.reconcile_cron: str = cron

    def calls(self) -> list[str]:
        """The method (Slack) or path (Jira) of every request the emulator answered so far."""
        if isinstance(self.emulator, SlackEmulator):
            return [r.method for r in self.emulator.calls()]
        assert isinstance(self.emulator, JiraEmulator)
        return [_jira_endpoint(r.path) for r in self.emulator.calls()]


def _jira_endpoint(path: str) -> str:
    parts = path.split("/")  # /rest/api/3/issue/700001/comment -> issue/{id}/comment
    tail = parts[4:] if len(parts) > 4 and parts[1] == "rest" else parts
    return "/".join("{id}" if p.isdigit() or "-" in p else p for p in tail)


def cron_instants(cron: str, start: datetime, end: datetime) -> Iterator[datetime]:
    """The ticks of ``cron`` (UTC) in [start, end]."""
    for tick in cron_string_iterator(start.timestamp() - 1e-6, cron, "UTC"):
        tick = tick.astimezone(UTC)
        if tick > end:
            return
        if tick >= start:
            yield tick


class SyncWeek:
    """The daemon of ``scenario`` over ``world`` on a fake clock, on ``instance`` and ``settings``' data folder."""

    def __init__(
        self,
        scenario: Scenario,
        world: World,
        settings: Settings,
        instance: dg.DagsterInstance,
        emulator_of: dict[str, Any],
        track_lag: bool = True,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.scenario = scenario
        self.world = world
        self.settings = settings
        self.instance = instance
        self.track_lag = track_lag
        self.log = log or (lambda _msg: None)
        self.sources = {s: _Source(s, settings, instance, emulator_of[s], scenario.start) for s in scenario.sources}
        self.result = WeekResult(scenario)
        self._tick_times: dict[str, list[datetime]] = defaultdict(list)

    def actions(self) -> list[tuple[datetime, int, str, str]]:
        """(instant, order, kind, source) of every daemon action in the week: sensor ticks and schedules."""
        s = self.scenario
        out = []
        for order, (name, source) in enumerate(self.sources.items()):
            for tick in cron_instants(s.cron(name), s.start, s.end):
                out.append((tick + s.evaluation_delay, order, "tick", name))
            for instant in cron_instants(source.reconcile_cron, s.start + timedelta(seconds=1), s.end):
                out.append((instant, order, "reconcile", name))
        return sorted(out)

    def run(self) -> WeekResult:
        started = time.perf_counter()
        for at, _, kind, source in self.actions():
            if self.scenario.in_outage(at):
                continue
            self._apply(at)
            if kind == "tick":
                self._tick(source, at)
            else:
                self._reconcile(source, at)
            if self.track_lag:
                self._observe(source, at, kind)
        self._apply(self.scenario.end)
        self.result.expectations = self.world.expectations
        self.result.container_days = self._container_days()
        self.result.seconds = time.perf_counter() - started
        return self.result

    def _apply(self, until: datetime) -> None:
        for change in self.world.advance(until):
            for e in change.expectations:
                if e.expect == "changed":
                    # Read now: the snapshot of the last observation may predate the run that indexed the target.
                    e.baseline = indexed(self.settings, e.source).get(e.doc_id)

    def _tick(self, name: str, at: datetime) -> None:
        source = self.sources[name]
        h = source.harness
        before = len(source.calls())
        evaluation, evaluations, runs = at, 0, 0
        h.now = at
        h.discover()
        while evaluations < MAX_EVALUATIONS_PER_TICK:
            h.now = evaluation
            requests = h.plan()
            evaluations += 1
            if not requests:
                break
            for request, executed in zip(requests, h.execute(requests), strict=True):
                self.result.runs.extend(_run_records(name, h.instance, request, executed))
                runs += 1
            h.results.clear()
            capped = [
                part
                for r in requests
                for part in plan_of(r).values()
                if part["synced_through"] and part["synced_through"] < r.tags[PLANNED_AT_TAG]
            ]
            if not capped:
                break
            evaluation += REEVALUATE_AFTER
        calls = source.calls()[before:]
        self._tick_times[name].append(at)
        self.result.ticks.append(TickRecord(name, at, evaluations, runs, len(calls), dict(Counter(calls))))
        if runs:
            self.log(f"{at:%a %H:%M} {name}: {runs} run(s), {len(calls)} API calls")

    def _reconcile(self, name: str, at: datetime) -> None:
        source = self.sources[name]
        before = len(source.calls())
        source.harness.now = at
        executed = source.harness.reconcile()
        calls = len(source.calls()) - before
        self.result.reconciliations.append(ReconcileRecord(name, at, executed.success, calls))
        self.log(f"{at:%a %H:%M} {name}: reconciliation {'ok' if executed.success else 'FAILED'}, {calls} API calls")

    def _observe(self, name: str, at: datetime, kind: str) -> None:
        """After a daemon action: which of the source's pending changes the index shows now."""
        pending = [e for e in self.world.expectations if e.source == name and e.indexed_at is None]
        if not pending:
            return
        snapshot = indexed(self.settings, name)
        for e in pending:
            if satisfied(e, snapshot):
                e.indexed_at, e.indexed_by = at, kind
                e.lag_ticks = sum(1 for t in self._tick_times[name] if e.visible_at < t <= at)

    def _container_days(self) -> dict[str, float]:
        s = self.scenario
        out: dict[str, float] = defaultdict(float)
        for change in self.world.changes:
            if change.kind == "container":
                existed = s.end - max(change.at, s.start)
                out[change.source] += existed.total_seconds() / 86400
        return dict(out)


def _run_records(
    source: str, instance: dg.DagsterInstance, request: dg.RunRequest, executed: dg.ExecuteInProcessResult
) -> list[RunRecord]:
    """One record per container of a sync run (a run covers every container that was behind)."""
    checks = [c for c in executed.get_asset_check_evaluations() if c.check_name == "no_missing_days"]
    success = container_results(instance, [executed])
    return [
        RunRecord(
            source=source,
            container=container,
            reason=part["reason"],
            planned_at=datetime.fromisoformat(request.tags[PLANNED_AT_TAG]),
            synced_through=datetime.fromisoformat(part["synced_through"]),
            estimated_requests=int(part["estimated_requests"]),
            success=success[container],
            gap_check_passed=all(c.passed for c in checks) if checks else None,
        )
        for container, part in plan_of(request).items()
    ]


def satisfied(e: Expectation, snapshot: dict[str, IndexedDocument]) -> bool:
    doc = snapshot.get(e.doc_id)
    if e.expect == "absent":
        return doc is None
    if e.expect == "changed":  # a later deletion of the whole thread also changes it
        return doc != e.baseline
    return doc is not None and doc.version >= e.min_version - 1e-6


def indexed(settings: Settings, source: str) -> dict[str, IndexedDocument]:
    """The source's documents in the index of ``settings``' data folder."""
    with qdrant_resource(settings).open() as store:
        return store.indexed_documents(SearchFilter(sources=(source,)))


# -- the reference: a fresh full sync of the same state ------------------------------------------------------------


def fresh_sync(
    scenario: Scenario,
    slack: SlackEmulator | None,
    jira: JiraEmulator | None,
    data_dir: Path,
    now: datetime,
) -> Settings:
    """Sync the emulators' current state from scratch into ``data_dir`` on a fresh instance: every container's
    whole history as one range run (initial history back to the first partition day, no request budget)."""
    days = (now.date() - datetime.fromisoformat(scenario.partition_start).date()).days + 1
    env = scenario_env(
        scenario,
        data_dir,
        slack,
        jira,
        SLACK_INITIAL_HISTORY_DAYS=str(days),
        JIRA_INITIAL_HISTORY_DAYS=str(days),
        SLACK_REQUESTS_PER_MINUTE="100000",
    )
    settings = Settings.from_env(env)
    with dg.DagsterInstance.ephemeral() as instance:
        for source in scenario.sources:
            h = SyncHarness(settings, source, instance, now=now)
            h.discover()
            for _ in range(5):
                requests = h.plan()
                if not requests:
                    break
                failed = [r.dagster_run.run_id for r in h.execute(requests) if not r.success]
                assert not failed, f"the fresh {source} sync failed: {failed}"
    return settings


@dataclass
class IndexComparison:
    """The simulated index against the fresh one, per source."""

    source: str
    documents: int
    missing: list[str] = field(default_factory=list)  # in the fresh index only
    extra: list[str] = field(default_factory=list)  # in the simulated index only (deleted at the source)
    stale: list[str] = field(default_factory=list)  # other content, or an older version
    duplicated: list[str] = field(default_factory=list)  # more points (parents or children) than the fresh sync wrote
    versions_differ: list[str] = field(default_factory=list)  # same content, other version (a rewrite's +1 us)

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "missing": len(self.missing),
            "extra": len(self.extra),
            "stale": len(self.stale),
            "duplicated": len(self.duplicated),
            "versions_differ_same_content": len(self.versions_differ),
        }


def _points(settings: Settings, source: str, doc_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """(parent points, child points) per document."""
    out = {}
    with qdrant_resource(settings).open() as store:
        for doc_id in doc_ids:
            flt = SearchFilter(sources=(source,), document_ids=(doc_id,))
            out[doc_id] = (store.count(store.names.parents, flt), store.count(store.names.children, flt))
    return out


def compare_indexes(simulated: Settings, fresh: Settings, source: str) -> IndexComparison:
    """Document by document: ids, content hashes, versions and point counts."""
    mine, reference = indexed(simulated, source), indexed(fresh, source)
    out = IndexComparison(source, len(reference))
    out.missing = sorted(set(reference) - set(mine))
    out.extra = sorted(set(mine) - set(reference))
    common = sorted(set(mine) & set(reference))
    for doc_id in common:
        a, b = mine[doc_id], reference[doc_id]
        if a.content_hash != b.content_hash or a.version < b.version or a.acl != b.acl:
            out.stale.append(doc_id)
        elif a.version != b.version:
            out.versions_differ.append(doc_id)
    mine_points, reference_points = _points(simulated, source, common), _points(fresh, source, common)
    out.duplicated = [d for d in common if mine_points[d] != reference_points[d]]
    return out


# -- figures -------------------------------------------------------------------------------------------------------


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _stats(values: Sequence[float], digits: int = 2) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(_quantile(values, 0.5), digits),
        "p95": round(_quantile(values, 0.95), digits),
        "max": round(max(values), digits),
        "mean": round(statistics.fmean(values), digits),
    }


def first_nominal_evaluation(scenario: Scenario, source: str, instant: datetime) -> datetime:
    """The first evaluation the daemon would make after ``instant`` if it were up."""
    cron = scenario.cron(source)
    for tick in cron_string_iterator((instant - scenario.evaluation_delay).timestamp(), cron, "UTC"):
        evaluation = tick.astimezone(UTC) + scenario.evaluation_delay
        if evaluation >= instant:
            return evaluation
    raise AssertionError("a cron has a next tick")


def outage_affected(scenario: Scenario, e: Expectation) -> bool:
    """Whether the first evaluation after the change fell in the outage."""
    return scenario.in_outage(first_nominal_evaluation(scenario, e.source, e.visible_at))


def lag_figures(result: WeekResult, source: str) -> dict[str, Any]:
    """Lag from each change to the first daemon action after which the index shows it: ticks and hours."""
    s = result.scenario
    mine = [e for e in result.expectations if e.source == source]
    never = [e for e in mine if e.indexed_at is None]

    def hours(e: Expectation) -> float:
        assert e.indexed_at is not None
        return (e.indexed_at - e.visible_at).total_seconds() / 3600

    synced = [e for e in mine if not e.reconciled_kind and e.indexed_at is not None]
    normal = [e for e in synced if not outage_affected(s, e)]
    during = [e for e in synced if outage_affected(s, e)]
    out: dict[str, Any] = {
        "changes": len(mine),
        "never_indexed": len(never),
        "never_indexed_examples": [f"{e.kind} {e.doc_id} at {e.visible_at:%a %H:%M:%S}" for e in never[:5]],
        "synced_outside_outage": {
            "ticks": _stats([e.lag_ticks or 0 for e in normal], 0),
            "hours": _stats([hours(e) for e in normal]),
            "indexed_by_reconciliation": sum(1 for e in normal if e.indexed_by == "reconcile"),
        },
        "by_kind": {
            kind: {"ticks": _stats([e.lag_ticks or 0 for e in group], 0), "hours": _stats([hours(e) for e in group])}
            for kind, group in sorted(_group(normal, lambda e: e.kind).items())
        },
        "reconciled_changes": {
            "kinds": dict(Counter(e.kind for e in mine if e.reconciled_kind)),
            "hours": _stats([hours(e) for e in mine if e.reconciled_kind and e.indexed_at is not None]),
        },
    }
    window = s.outage_window
    if window is not None:
        out["outage"] = {
            "from": window[0].isoformat(),
            "to": window[1].isoformat(),
            "changes_waiting": len(during),
            "ticks_after_outage_until_all_indexed": max((e.lag_ticks or 0 for e in during), default=0),
            "hours_after_outage_until_all_indexed": round(
                max(((e.indexed_at - window[1]).total_seconds() / 3600 for e in during if e.indexed_at), default=0.0),
                2,
            ),
        }
    return out


def _group(items: Sequence[Expectation], key: Callable[[Expectation], str]) -> dict[str, list[Expectation]]:
    out: dict[str, list[Expectation]] = defaultdict(list)
    for item in items:
        out[key(item)].append(item)
    return out


def budget_windows(instance: dg.DagsterInstance, api_tag: str, cron: str) -> list[tuple[datetime, int, int]]:
    """(tick, runs, estimated requests) of every tick window in which sync runs of the source were planned,
    read back from the runs' tags on the instance."""
    windows: dict[datetime, list[int]] = defaultdict(list)
    for record in instance.get_run_records(dg.RunsFilter(tags={SOURCE_TAG: api_tag})):
        tags = record.dagster_run.tags
        if PLANNED_AT_TAG not in tags or ESTIMATED_REQUESTS_TAG not in tags:
            continue
        latest, _ = cron_window(cron, datetime.fromisoformat(tags[PLANNED_AT_TAG]))
        windows[latest].append(int(tags[ESTIMATED_REQUESTS_TAG]))
    return sorted((tick, len(estimates), sum(estimates)) for tick, estimates in windows.items())


def api_figures(result: WeekResult, source: str, budget_per_tick: int | None) -> dict[str, Any]:
    """API calls per tick (discovery and sync runs) and per container-day, reconciliation apart."""
    ticks = [t for t in result.ticks if t.source == source]
    per_tick = [t.api_calls for t in ticks]
    methods: Counter[str] = Counter()
    for t in ticks:
        methods.update(t.calls_by_method)
    total = sum(per_tick)
    recon = [r.api_calls for r in result.reconciliations if r.source == source]
    out: dict[str, Any] = {
        "ticks": len(ticks),
        "per_tick": _stats(per_tick, 1),
        "total_sync": total,
        "container_days": round(result.container_days.get(source, 0.0), 2),
        "per_container_day": round(total / result.container_days[source], 1)
        if result.container_days.get(source)
        else None,
        "by_method": dict(methods.most_common()),
        "reconciliation_per_run": _stats(recon, 1),
    }
    if source == "slack":
        # Slack's per-method limits concern the message methods: what a tick window asked of each.
        for method in ("conversations.history", "conversations.replies"):
            out[f"max_{method}_per_tick"] = max((t.calls_by_method.get(method, 0) for t in ticks), default=0)
        out["budget_per_tick"] = budget_per_tick
        out["ticks_over_budget"] = sum(1 for c in per_tick if budget_per_tick is not None and c > budget_per_tick)
    return out


def run_week(
    scenario: Scenario,
    workdir: Path,
    track_lag: bool = True,
    compare: bool = True,
    log: Callable[[str], None] | None = None,
) -> tuple[WeekResult, dict[str, IndexComparison], dict[str, Any]]:
    """The whole simulation in ``workdir``: the week, then (``compare``) a fresh sync of the final state and the
    comparison; also returns per-source facts read back from the instance (planned budgets)."""
    world = World(scenario)
    with emulators(scenario, world) as (slack, jira), dg.DagsterInstance.ephemeral() as instance:
        settings = Settings.from_env(scenario_env(scenario, workdir / "data", slack, jira))
        week = SyncWeek(scenario, world, settings, instance, {"slack": slack, "jira": jira}, track_lag, log)
        result = week.run()
        facts: dict[str, Any] = {}
        for name, source in week.sources.items():
            sync = settings.automation.sync(name)
            minutes = _tick_minutes(sync.cron, scenario.start)
            budget = sync.requests_per_minute * minutes if sync.requests_per_minute else None
            facts[name] = {
                "budget_per_tick": budget,
                "windows": budget_windows(instance, source.harness.spec.api_tag, sync.cron),
                "requests_per_minute": sync.requests_per_minute,
            }
        comparisons: dict[str, IndexComparison] = {}
        if compare:
            fresh = fresh_sync(scenario, slack, jira, workdir / "fresh", scenario.end + timedelta(minutes=1))
            comparisons = {s: compare_indexes(settings, fresh, s) for s in scenario.sources}
    return result, comparisons, facts


def _tick_minutes(cron: str, at: datetime) -> int:
    latest, upcoming = cron_window(cron, at)
    return int((upcoming - latest).total_seconds() // 60)
