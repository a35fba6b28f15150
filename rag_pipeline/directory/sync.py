"""One directory sync: write a source's snapshot, then make the index honour what changed.

Group memberships live in the directory only: a reader resolved after the write has them, so they are honoured
when the write commits. Where a source keeps a container's readers in the index too (a Slack channel's threads'
``acl.users``), its registered ``access.refresh_acls`` rewrites those documents' ACLs in place (no re-embedding).

``acl_lag_seconds`` is the time from the sync observing a change (the instant it started reading) to the
index honouring it; the change itself happened after the previous sync, so ``acl_lag_bound_seconds`` (from
the previous sync) bounds the true lag from above.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rag_pipeline.directory.accounts import DirectorySnapshot, count_by_status
from rag_pipeline.directory.people import people_of
from rag_pipeline.directory.store import DirectoryChange, DirectoryStore
from rag_pipeline.index.store import VectorStore
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.registry import load_object, registered_sources


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


def sync_directory(
    snapshot: DirectorySnapshot,
    directory: DirectoryStore,
    index: VectorStore | None = None,
    index_skipped: str | None = None,
    started: float | None = None,
) -> DirectorySync:
    """Write ``snapshot`` and, where its source keeps readers in the index (``access.refresh_acls``) and ``index``
    is given, rewrite the ACLs of containers whose readers changed. ``index_skipped`` says why no index was given
    (reported)."""
    started = time.perf_counter() if started is None else started
    change = directory.replace(snapshot)
    honoured_at = time.time()
    updated: list[str] = []
    source = registered_sources().get(snapshot.source)
    refresh = source.access.refresh_acls if source is not None else None
    if refresh and change.channels and change.previous_at is not None:
        if index is not None:
            updated = load_object(refresh)(index, snapshot.scope, change)
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
