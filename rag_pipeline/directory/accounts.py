"""What a directory sync learns about one account of one source, and how a source's snapshot is checked.

An account carries the ACL groups it holds *as the index writes them* (``slack:T:members``,
``jira:site:project:KEY``...), each with the grant that gives it ("member of Jira group jira-devs"), so a
reader is resolved with the same strings the ``acl`` payload holds and ``explain`` can say why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rag_pipeline.sources.problems import RecordProblem, shown

# member: a full member of the workspace or site; guest: a Slack multi/single-channel guest (sees only the
# channels it is in); external: a Slack Connect user of another organisation; deleted / inactive: kept so
# `whois` can say so, holding no groups; bot: an app user; named: seen in the data (a Jira reporter) with no
# membership known.
AccountStatus = Literal["member", "guest", "external", "deleted", "inactive", "bot", "named"]
STATUSES: tuple[AccountStatus, ...] = ("member", "guest", "external", "deleted", "inactive", "bot", "named")

_EMAIL = re.compile(r"^[^@\s,]+@[^@\s,]+\.[^@\s,]+$")
# Ids as the sources hand them out (U0123ABC, 5b10a2844c20165700ede21g, Jira Server usernames, which may hold
# spaces): one line of printable characters, no surrounding blanks.
_ACCOUNT_ID = re.compile(r"^[^\x00-\x1f\x7f\s](?:[^\x00-\x1f\x7f]{0,254}[^\x00-\x1f\x7f\s])?$")


@dataclass(frozen=True)
class ChannelMembership:
    """A Slack channel an account is a member of, where its membership decides who reads it (private
    channels, and shared channels for their external members)."""

    id: str
    name: str
    private: bool


@dataclass(frozen=True)
class Account:
    """One account of one source (``scope``: the Slack team id or the Jira site)."""

    source: str
    scope: str
    account_id: str
    display_name: str | None = None
    email: str | None = None  # lower case; None when the source does not say
    status: AccountStatus = "member"
    # ACL group -> the grant that gives it (shown by whois and explain)
    groups: Mapping[str, str] = field(default_factory=dict)
    channels: tuple[ChannelMembership, ...] = ()
    team: str | None = None  # Slack: the account's own team (another one for external members)

    def key(self) -> tuple[str, str, str]:
        return (self.source, self.scope, self.account_id)


@dataclass
class DirectorySnapshot:
    """Everything one sync read of one source: its accounts, the records it could not use, and when."""

    source: str
    scope: str
    synced_at: float
    accounts: dict[str, Account] = field(default_factory=dict)
    problems: list[RecordProblem] = field(default_factory=list)
    api_calls: int = 0
    # Slack channels whose readers the ACL names: channel id -> (name, private, readers: every member of a
    # private channel, the external members of a shared one). The ACL refresh compares these with the index.
    channel_members: dict[str, tuple[str, bool, tuple[str, ...]]] = field(default_factory=dict)

    def add(self, account: Account) -> None:
        """Keep ``account``; one seen twice (a user listed and also named in a channel) is merged, the first
        record's name, email and status winning."""
        if account.account_id in self.accounts:
            known = self.accounts[account.account_id]
            merged_groups = {**known.groups, **account.groups}
            channels = tuple(dict.fromkeys((*known.channels, *account.channels)))
            self.accounts[account.account_id] = Account(
                known.source,
                known.scope,
                known.account_id,
                known.display_name or account.display_name,
                known.email or account.email,
                known.status,
                merged_groups,
                channels,
                known.team,
            )
            return
        self.accounts[account.account_id] = account

    def grant(self, account_id: str, group: str, because: str) -> None:
        """Give a known account one more ACL group (a derived grant: a project browsed through a group)."""
        account = self.accounts.get(account_id)
        if account is None or group in account.groups or account.status in ("deleted", "inactive", "bot"):
            return
        self.accounts[account_id] = _with(account, groups={**account.groups, group: because})

    def join(self, account_id: str, channel: ChannelMembership) -> None:
        account = self.accounts.get(account_id)
        if account is not None and channel not in account.channels:
            self.accounts[account_id] = _with(account, channels=(*account.channels, channel))


def _with(account: Account, **changes: Any) -> Account:
    return dataclasses.replace(account, **changes)


def checked_account_id(value: object, where: str, problems: list[RecordProblem]) -> str | None:
    """The id of a record, or None (and a problem naming the record) when it has none that can be used."""
    if isinstance(value, str) and _ACCOUNT_ID.match(value):
        return value
    what = "no id" if value in (None, "") else f"id {shown(value)} is not an account id"
    problems.append(RecordProblem(where, f"{what}; record not kept"))
    return None


def checked_email(value: object, where: str, problems: list[RecordProblem]) -> str | None:
    """A record's email in lower case (matching is case-insensitive), None when absent; an email that is not
    one is reported and dropped, so it can never join two people."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and _EMAIL.match(value.strip()):
        return value.strip().lower()
    problems.append(RecordProblem(where, f"email {shown(value)} is not an email address; kept without it"))
    return None


def count_by_status(accounts: Iterable[Account]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for account in accounts:
        counts[account.status] += 1
    return {k: v for k, v in counts.items() if v}
