"""One directory sync: write a source's snapshot, then make the index honour what changed.

Jira groups, Slack workspace membership and security levels live in the directory only: a reader resolved
after the write has them, so they are honoured when the write commits. A Slack channel's readers live in the
index too (its threads' ``acl.users``), so a channel whose readers changed gets its threads' ACL rewritten in
place (no re-embedding), through the reconciliation's ``update_acls``.

``acl_lag_seconds`` is the time from the sync observing a change (the instant it started reading) to the
index honouring it; the change itself happened after the previous sync, so ``acl_lag_bound_seconds`` (from
the previous sync) bounds the true lag from above.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rag_pipeline.connectors.slack.threads import workspace_group
from rag_pipeline.directory.accounts import DirectorySnapshot, count_by_status
from rag_pipeline.directory.people import people_of
from rag_pipeline.directory.store import DirectoryChange, DirectoryStore
from rag_pipeline.index.store import SearchFilter, VectorStore
from rag_pipeline.reconciliation.reconcile import acl_differs, update_acls
from rag_pipeline.sources.document import Acl
from rag_pipeline.sources.problems import RecordProblem


@dataclass
class DirectorySync:
    """What one sync read, changed and rewrote (CLI summary and Dagster metadata)."""

    source: str
    scope: str
    accounts: int
    people: int
    by_status: dict[str, int]
    problems: list[RecordProblem]
    api_calls: int
    seconds: float
    change: DirectoryChange
    acl_documents_updated: list[str] = field(default_factory=list)
    acl_lag_seconds: float | None = None
    acl_lag_bound_seconds: float | None = None
    index_skipped: str | None = None  # why channel ACLs were not compared with the index

    def as_metadata(self) -> dict[str, object]:
        return {
            "source": self.source,
            "scope": self.scope,
            "accounts": self.accounts,
            "people": self.people,
            "accounts_by_status": self.by_status,
            "records_skipped": len(self.problems),
            "api_calls": self.api_calls,
            "seconds": round(self.seconds, 3),
            "accounts_added": len(self.change.added),
            "accounts_removed": len(self.change.removed),
            "memberships_changed": self.change.memberships_changed,
            "channels_changed": len(self.change.channels),
            "acl_documents_updated": len(self.acl_documents_updated),
            "acl_lag_seconds": None if self.acl_lag_seconds is None else round(self.acl_lag_seconds, 3),
            "acl_lag_bound_seconds": None
            if self.acl_lag_bound_seconds is None
            else round(self.acl_lag_bound_seconds, 3),
        }

    def summary(self) -> str:
        status = ", ".join(f"{n:,} {s}" for s, n in self.by_status.items())
        changes = (
            "first sync"
            if self.change.previous_at is None
            else f"{self.change.memberships_changed:,} membership change(s)"
        )
        text = (
            f"directory {self.source} ({self.scope}): {self.accounts:,} accounts ({status}), {self.people:,} people, "
            f"{changes}, {self.seconds:.1f} s"
        )
        if self.acl_documents_updated:
            text += f", {len(self.acl_documents_updated):,} document ACL(s) rewritten"
        if self.acl_lag_seconds is not None:
            text += f", honoured {self.acl_lag_seconds:.1f} s after the sync saw it"
        if self.problems:
            text += f"; {len(self.problems):,} record(s) skipped"
        return text


def channel_acl(team_id: str, private: bool, readers: tuple[str, ...]) -> Acl:
    """The ACL a channel's threads carry (``SlackChannel.acl``): its members, or the workspace plus externals."""
    return Acl(users=readers) if private else Acl(users=readers, groups=(workspace_group(team_id),))


def refresh_channel_acls(store: VectorStore, team_id: str, change: DirectoryChange) -> list[str]:
    """Rewrite the ACL of every indexed thread of a channel whose readers changed; the documents updated.

    The directory only narrows or re-lists readers: a thread the index holds without the workspace group never
    gains it here. Only a channel's own read (the connector's or the reconciliation's ``conversations.info``,
    which fails the channel when ``is_private`` is missing) may make a private channel's threads readable by
    the whole workspace; a directory record that wrongly says "public" must not."""
    workspace = workspace_group(team_id)
    updates: dict[str, Acl] = {}
    for channel_id, (_name, private, readers) in sorted(change.channels.items()):
        acl = channel_acl(team_id, private, readers)
        indexed = store.indexed_documents(SearchFilter(sources=("slack",), containers=(channel_id,)))
        for doc_id, doc in indexed.items():
            widens = workspace in acl.groups and (doc.acl is None or workspace not in doc.acl.groups)
            if acl_differs(doc, acl) and not widens:
                updates[doc_id] = acl
    return update_acls(store, updates) if updates else []


def sync_directory(
    snapshot: DirectorySnapshot,
    directory: DirectoryStore,
    index: VectorStore | None = None,
    index_skipped: str | None = None,
    started: float | None = None,
) -> DirectorySync:
    """Write ``snapshot`` and, for Slack with ``index`` given, rewrite the ACLs of channels whose readers
    changed. ``index_skipped`` says why no index was given (reported)."""
    started = time.perf_counter() if started is None else started
    change = directory.replace(snapshot)
    honoured_at = time.time()
    updated: list[str] = []
    if snapshot.source == "slack" and change.channels and change.previous_at is not None:
        if index is not None:
            updated = refresh_channel_acls(index, snapshot.scope, change)
            honoured_at = time.time()
        elif index_skipped is None:
            index_skipped = "no index given"
    changed = change.memberships_changed > 0 and change.previous_at is not None
    return DirectorySync(
        source=snapshot.source,
        scope=snapshot.scope,
        accounts=len(snapshot.accounts),
        people=people_of(snapshot.accounts.values()),
        by_status=count_by_status(snapshot.accounts.values()),
        problems=list(snapshot.problems),
        api_calls=snapshot.api_calls,
        seconds=time.perf_counter() - started,
        change=change,
        acl_documents_updated=updated,
        acl_lag_seconds=honoured_at - snapshot.synced_at if changed else None,
        acl_lag_bound_seconds=honoured_at - change.previous_at if changed and change.previous_at else None,
        index_skipped=index_skipped if changed else None,
    )
