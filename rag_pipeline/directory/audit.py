"""The access audit: who gained or lost access to what at each directory sync, and how many documents that was.

Every directory sync records, in its own transaction, each account that gained or lost an ACL group or a place
among a channel's named readers (``directory/store.py``, table ``access_changes``; a first sync is a baseline and
records nothing). This module counts the documents each grant admits in the index, words the rows for people,
and says when a sync changed so much at once that someone should look (a permission read gone wrong, a group
emptied by mistake) before the next search serves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rag_pipeline.directory.explain import describe_group, instant
from rag_pipeline.directory.store import CHANNEL_GRANT, AccessChangeRow, DirectoryStore
from rag_pipeline.index.store import AclCondition, SearchFilter, VectorStore

# A sync that changes the access of more accounts than this is a mass change (the check fails and notifies).
DEFAULT_MASS_CHANGE_ACCOUNTS = 25


def documents_admitted(index: VectorStore, source: str, grant_id: str) -> int:
    """How many indexed documents ``grant_id`` admits: a channel's threads for ``channel:<id>``, else the documents
    whose ACL names the group."""
    if grant_id.startswith(CHANNEL_GRANT):
        channel = grant_id[len(CHANNEL_GRANT) :]
        return len(index.indexed_documents(SearchFilter(sources=(source,), containers=(channel,))))
    return len(index.indexed_documents(SearchFilter(acl=AclCondition(groups=(grant_id,)))))


def count_documents(index: VectorStore, rows: Sequence[AccessChangeRow]) -> dict[int, int]:
    """Row id -> documents its grant admits, for the rows not counted yet (each grant counted once)."""
    counted: dict[tuple[str, str], int] = {}
    found: dict[int, int] = {}
    for row in rows:
        if row.documents is not None:
            continue
        key = (row.source, row.grant_id)
        if key not in counted:
            counted[key] = documents_admitted(index, row.source, row.grant_id)
        found[row.id] = counted[key]
    return found


def describe_grant(grant_id: str, source: str, store: DirectoryStore) -> str:
    """A grant in words: the group's meaning, or the channel's name."""
    if grant_id.startswith(CHANNEL_GRANT):
        channel_id = grant_id[len(CHANNEL_GRANT) :]
        channel = store.channel(source, channel_id)
        if channel is None:
            return f"the readers of channel {channel_id}"
        return f"the readers of {'private' if channel[1] else 'shared'} channel #{channel[0]} ({channel_id})"
    return describe_group(grant_id)


@dataclass(frozen=True)
class AccessAudit:
    """The access changes of one period, summed up for the asset's metadata, its check and ``rag-pipeline audit``."""

    rows: tuple[AccessChangeRow, ...]

    @property
    def accounts_changed(self) -> int:
        return len({(r.source, r.account_id) for r in self.rows})

    def accounts(self, change: str) -> int:
        return len({(r.source, r.account_id) for r in self.rows if r.change == change})

    def documents(self, change: str) -> int:
        """Documents gained (or lost), summed over accounts and grants (a document reached by two grants counts
        twice: an upper bound, which is what a reviewer of a mass change needs)."""
        return sum(r.documents or 0 for r in self.rows if r.change == change)

    def is_mass_change(self, threshold: int = DEFAULT_MASS_CHANGE_ACCOUNTS) -> bool:
        return self.accounts_changed > threshold

    def lines(self, store: DirectoryStore) -> list[str]:
        """One line per row: when, who, gained/lost what, how many documents."""
        described: dict[tuple[str, str], str] = {}
        out = []
        for row in self.rows:
            key = (row.source, row.grant_id)
            if key not in described:
                described[key] = describe_grant(row.grant_id, row.source, store)
            who = f"{row.email} ({row.account_id})" if row.email else row.account_id
            count = "? documents" if row.documents is None else f"{row.documents:,} document(s)"
            out.append(f"{instant(row.observed_at)} {row.source} {who} {row.change} {described[key]} ({count})")
        return out

    def as_json(self, store: DirectoryStore) -> list[dict[str, object]]:
        return [
            {
                "observed_at": instant(r.observed_at),
                "source": r.source,
                "scope": r.scope,
                "account_id": r.account_id,
                "email": r.email,
                "change": r.change,
                "grant": r.grant_id,
                "grant_described": describe_grant(r.grant_id, r.source, store),
                "documents": r.documents,
            }
            for r in self.rows
        ]
