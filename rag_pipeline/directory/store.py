"""The directory on disk: one SQLite file in the data folder, one transaction per source sync.

A sync replaces its source's accounts in one transaction (readers see the old directory or the new one,
never half of each; WAL lets the search service read while a sync writes), and keeps what changed: accounts
that gained or lost a group or a channel, with the instant the sync observed it, so the time until the index
honoured a change can be reported (``acl_lag_seconds``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rag_pipeline.directory.accounts import Account, ChannelMembership, DirectorySnapshot

_SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (
    source TEXT NOT NULL, scope TEXT NOT NULL, account_id TEXT NOT NULL,
    display_name TEXT, email TEXT, status TEXT NOT NULL, team TEXT,
    groups TEXT NOT NULL, channels TEXT NOT NULL,
    PRIMARY KEY (source, scope, account_id)
);
CREATE INDEX IF NOT EXISTS accounts_email ON accounts (email);
CREATE INDEX IF NOT EXISTS accounts_id ON accounts (account_id);
CREATE TABLE IF NOT EXISTS syncs (
    source TEXT NOT NULL, scope TEXT NOT NULL, synced_at REAL NOT NULL, previous_at REAL,
    accounts INTEGER NOT NULL, problems INTEGER NOT NULL, api_calls INTEGER NOT NULL,
    PRIMARY KEY (source, scope)
);
CREATE TABLE IF NOT EXISTS access_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, observed_at REAL NOT NULL, source TEXT NOT NULL, scope TEXT NOT NULL,
    account_id TEXT NOT NULL, email TEXT, change TEXT NOT NULL, grant_id TEXT NOT NULL, documents INTEGER
);
CREATE INDEX IF NOT EXISTS access_changes_at ON access_changes (observed_at);
CREATE TABLE IF NOT EXISTS channel_members (
    source TEXT NOT NULL, scope TEXT NOT NULL, channel_id TEXT NOT NULL,
    name TEXT NOT NULL, private INTEGER NOT NULL, members TEXT NOT NULL,
    PRIMARY KEY (source, scope, channel_id)
);
"""


@dataclass(frozen=True)
class SyncRecord:
    """When a source's directory was last synced, and what that sync read."""

    source: str
    scope: str
    synced_at: float
    previous_at: float | None
    accounts: int
    problems: int
    api_calls: int


@dataclass
class DirectoryChange:
    """What one sync changed against the directory before it."""

    source: str
    scope: str
    observed_at: float
    previous_at: float | None
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    # account id -> groups gained / lost
    gained: dict[str, list[str]] = field(default_factory=dict)
    lost: dict[str, list[str]] = field(default_factory=dict)
    # Slack channels whose member list differs from the last sync (or that are new): id -> (name, private, members)
    channels: dict[str, tuple[str, bool, tuple[str, ...]]] = field(default_factory=dict)
    # Their member lists at the last sync (absent for a new channel), for the access audit.
    channels_before: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def memberships_changed(self) -> int:
        return sum(map(len, self.gained.values())) + sum(map(len, self.lost.values())) + len(self.channels)


# The grant id of "named among a channel's readers" in the access audit (groups are their own ids).
CHANNEL_GRANT = "channel:"


@dataclass(frozen=True)
class AccessChangeRow:
    """One account gaining or losing one grant (an ACL group, or ``channel:<id>`` for a channel's named readers)
    at one directory sync; ``documents``: how many indexed documents the grant admits (None until counted)."""

    id: int
    observed_at: float
    source: str
    scope: str
    account_id: str
    email: str | None
    change: str  # "gained" or "lost"
    grant_id: str
    documents: int | None


_ACCESS_COLUMNS = ("id", "observed_at", "source", "scope", "account_id", "email", "change", "grant_id", "documents")


def access_rows(change: DirectoryChange, emails: dict[str, str | None]) -> list[tuple[object, ...]]:
    """The audit rows of one sync's change (none for a first sync: a baseline, not a change)."""
    if change.previous_at is None:
        return []
    rows: list[tuple[object, ...]] = []
    head = (change.observed_at, change.source, change.scope)
    for kind, by_account in (("gained", change.gained), ("lost", change.lost)):
        for account_id, groups in sorted(by_account.items()):
            rows.extend((*head, account_id, emails.get(account_id), kind, g, None) for g in groups)
    for channel_id, (_name, _private, members) in sorted(change.channels.items()):
        before = set(change.channels_before.get(channel_id, ()))
        grant = CHANNEL_GRANT + channel_id
        for kind, accounts in (("gained", set(members) - before), ("lost", before - set(members))):
            rows.extend((*head, a, emails.get(a), kind, grant, None) for a in sorted(accounts))
    return rows


def _encode_account(account: Account) -> tuple[object, ...]:
    channels = [[c.id, c.name, c.private] for c in account.channels]
    return (
        account.source,
        account.scope,
        account.account_id,
        account.display_name,
        account.email,
        account.status,
        account.team,
        json.dumps(dict(sorted(account.groups.items()))),
        json.dumps(channels),
    )


def _decode_account(row: sqlite3.Row) -> Account:
    return Account(
        source=row["source"],
        scope=row["scope"],
        account_id=row["account_id"],
        display_name=row["display_name"],
        email=row["email"],
        status=row["status"],
        groups=json.loads(row["groups"]),
        channels=tuple(ChannelMembership(c[0], c[1], bool(c[2])) for c in json.loads(row["channels"])),
        team=row["team"],
    )


class DirectoryStore:
    """Read and replace the directory in ``path`` (created on first write; reads of a missing file find nothing)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @contextmanager
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        if write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        try:
            connection.row_factory = sqlite3.Row
            if write:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.executescript(_SCHEMA)
            yield connection
        finally:
            connection.close()

    def exists(self) -> bool:
        return self.path.is_file()

    def replace(self, snapshot: DirectorySnapshot) -> DirectoryChange:
        """Make ``snapshot`` the directory of its source (one transaction) and return what changed."""
        with self._connect(write=True) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                change = self._diff(db, snapshot)
                emails = {
                    r["account_id"]: r["email"]
                    for r in db.execute(
                        "SELECT account_id, email FROM accounts WHERE source = ? AND scope = ?",
                        (snapshot.source, snapshot.scope),
                    )
                }
                emails.update({a.account_id: a.email for a in snapshot.accounts.values()})
                # In the sync's transaction: the audit holds every change the directory made, never half of one.
                db.executemany(
                    "INSERT INTO access_changes (observed_at, source, scope, account_id, email, change, grant_id, "
                    "documents) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    access_rows(change, emails),
                )
                db.execute("DELETE FROM accounts WHERE source = ? AND scope = ?", (snapshot.source, snapshot.scope))
                db.executemany(
                    "INSERT INTO accounts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [_encode_account(a) for a in snapshot.accounts.values()],
                )
                db.execute(
                    "DELETE FROM channel_members WHERE source = ? AND scope = ?", (snapshot.source, snapshot.scope)
                )
                db.executemany(
                    "INSERT INTO channel_members VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (snapshot.source, snapshot.scope, cid, name, int(private), json.dumps(list(members)))
                        for cid, (name, private, members) in snapshot.channel_members.items()
                    ],
                )
                db.execute(
                    "INSERT OR REPLACE INTO syncs VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        snapshot.source,
                        snapshot.scope,
                        snapshot.synced_at,
                        change.previous_at,
                        len(snapshot.accounts),
                        len(snapshot.problems),
                        snapshot.api_calls,
                    ),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return change

    def _diff(self, db: sqlite3.Connection, snapshot: DirectorySnapshot) -> DirectoryChange:
        key = (snapshot.source, snapshot.scope)
        row = db.execute("SELECT synced_at FROM syncs WHERE source = ? AND scope = ?", key).fetchone()
        change = DirectoryChange(snapshot.source, snapshot.scope, snapshot.synced_at, row[0] if row else None)
        before = {
            r["account_id"]: set(json.loads(r["groups"]))
            for r in db.execute("SELECT account_id, groups FROM accounts WHERE source = ? AND scope = ?", key)
        }
        for account_id, account in snapshot.accounts.items():
            old = before.pop(account_id, None)
            if old is None:
                change.added.append(account_id)
                old = set()
            gained, lost = set(account.groups) - old, old - set(account.groups)
            if gained:
                change.gained[account_id] = sorted(gained)
            if lost:
                change.lost[account_id] = sorted(lost)
        for account_id, old in before.items():
            change.removed.append(account_id)
            if old:
                change.lost[account_id] = sorted(old)
        channels_before = {
            r["channel_id"]: tuple(json.loads(r["members"]))
            for r in db.execute("SELECT channel_id, members FROM channel_members WHERE source = ? AND scope = ?", key)
        }
        for channel_id, (name, private, members) in snapshot.channel_members.items():
            if sorted(channels_before.get(channel_id, ())) != sorted(members) or channel_id not in channels_before:
                change.channels[channel_id] = (name, private, members)
                if channel_id in channels_before:
                    change.channels_before[channel_id] = channels_before[channel_id]
        return change

    # --- reads --------------------------------------------------------------------------------
    def _select(self, where: str, args: Sequence[object]) -> list[Account]:
        if not self.exists():
            return []
        with self._connect() as db:
            return [_decode_account(r) for r in db.execute(f"SELECT * FROM accounts WHERE {where}", args)]

    def by_id(self, account_id: str, source: str | None = None) -> list[Account]:
        if source is None:
            return self._select("account_id = ?", (account_id,))
        return self._select("account_id = ? AND source = ?", (account_id, source))

    def accounts(self, source: str, scope: str) -> list[Account]:
        """Every account the last sync of ``source`` at ``scope`` recorded (what a failed read keeps holding)."""
        return self._select("source = ? AND scope = ?", (source, scope))

    def by_email(self, email: str) -> list[Account]:
        return self._select("email = ?", (email.strip().lower(),)) if email.strip() else []

    def syncs(self) -> list[SyncRecord]:
        if not self.exists():
            return []
        with self._connect() as db:
            return [
                SyncRecord(
                    r["source"],
                    r["scope"],
                    r["synced_at"],
                    r["previous_at"],
                    r["accounts"],
                    r["problems"],
                    r["api_calls"],
                )
                for r in db.execute("SELECT * FROM syncs ORDER BY source, scope")
            ]

    def channel(self, source: str, channel_id: str) -> tuple[str, bool, tuple[str, ...]] | None:
        """A channel's last synced (name, private, members), or None."""
        if not self.exists():
            return None
        with self._connect() as db:
            row = db.execute(
                "SELECT name, private, members FROM channel_members WHERE source = ? AND channel_id = ?",
                (source, channel_id),
            ).fetchone()
        return None if row is None else (row[0], bool(row[1]), tuple(json.loads(row[2])))

    def access_changes(self, since: float = 0.0, after_id: int = 0) -> list[AccessChangeRow]:
        """The audit's rows observed at or after ``since`` (and with an id above ``after_id``), oldest first."""
        if not self.exists():
            return []
        with self._connect(write=True) as db:  # creates the table in a directory written before the audit existed
            rows = db.execute(
                "SELECT * FROM access_changes WHERE observed_at >= ? AND id > ? ORDER BY id", (since, after_id)
            ).fetchall()
        return [AccessChangeRow(*(r[k] for k in _ACCESS_COLUMNS)) for r in rows]

    def count_access_documents(self, documents: dict[int, int]) -> None:
        """Record how many documents each audit row's grant admits (row id -> count)."""
        with self._connect(write=True) as db:
            db.executemany(
                "UPDATE access_changes SET documents = ? WHERE id = ?", [(n, i) for i, n in documents.items()]
            )

    def counts(self) -> dict[str, int]:
        if not self.exists():
            return {}
        with self._connect() as db:
            return {r[0]: r[1] for r in db.execute("SELECT source, COUNT(*) FROM accounts GROUP BY source")}


def now() -> float:
    return time.time()
