"""One person across sources: accounts joined by email (case-insensitive) and by an explicit links file, and
the reader (principal) a person searches as.

A links file joins accounts whose emails differ (or that have none): one person per line, identifiers
separated by commas or spaces, each an email or ``<source>:<account id>``::

    alice@acme.com, slack:U0ALICE, jira:5b10a2844c20165700ede21g

Accounts with no email are never joined by email: an empty email is not an identity.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rag_pipeline.directory.accounts import Account, ChannelMembership
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.sources.problems import SourceError

# Accounts that hold nothing: their ids must not admit a person to what names them (a deactivated Slack
# account listed in a private channel's ACL).
INACTIVE = frozenset({"deleted", "inactive", "bot"})
_SPLIT = re.compile(r"[,\s]+")


class UnknownPerson(LookupError):
    """No account of the directory matches what was asked."""


@dataclass(frozen=True)
class Links:
    """Explicit joins: each set holds the identifiers (emails, ``source:id``) of one person."""

    groups: tuple[frozenset[str], ...] = ()

    @classmethod
    def read(cls, path: str | Path | None) -> Links:
        """The links of ``path`` (none when it is None or missing); a line with one identifier is ignored."""
        if path is None or not Path(path).is_file():
            return cls()
        out: list[frozenset[str]] = []
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            given = [_normal(i) for i in _SPLIT.split(line) if i]
            ids = frozenset(given)
            bad = [i for i in given if "@" not in i and ":" not in i]
            if bad:
                raise SourceError(
                    f"{path}:{number}: {bad[0]!r} is neither an email nor <source>:<account id> (RAG_IDENTITY_LINKS)"
                )
            if len(ids) > 1:
                out.append(ids)
        return cls(tuple(out))

    def linked(self, identifier: str) -> set[str]:
        found: set[str] = set()
        for group in self.groups:
            if identifier in group:
                found |= group
        return found


def _normal(identifier: str) -> str:
    """Emails in lower case; ``source:id`` as given (ids are case-sensitive)."""
    return identifier.lower() if "@" in identifier and ":" not in identifier else identifier


def _identifiers(account: Account) -> set[str]:
    out = {f"{account.source}:{account.account_id}"}
    if account.email:
        out.add(account.email)
    return out


@dataclass
class Person:
    """Every account of one person, and what they hold together."""

    accounts: list[Account]
    links_used: bool = False
    synced: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        for account in self.accounts:
            if account.display_name:
                return account.display_name
        return self.accounts[0].account_id

    @property
    def emails(self) -> list[str]:
        return sorted({a.email for a in self.accounts if a.email})

    def ids(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for account in self.accounts:
            out.setdefault(account.source, []).append(account.account_id)
        return out

    def active_accounts(self) -> list[Account]:
        return [a for a in self.accounts if a.status not in INACTIVE]

    def groups(self) -> dict[str, str]:
        """ACL group -> the grant that gives it, over every active account."""
        out: dict[str, str] = {}
        for account in self.active_accounts():
            for group, because in account.groups.items():
                out.setdefault(group, because)
        return out

    def channels(self) -> list[tuple[Account, ChannelMembership]]:
        return [(a, c) for a in self.active_accounts() for c in a.channels]

    def principal(self) -> Principal:
        """The reader this person searches as: every active account id and every group."""
        ids = [a.account_id for a in self.active_accounts()]
        return Principal(
            user_id=ids[0] if ids else None, user_ids=tuple(dict.fromkeys(ids[1:])), groups=tuple(self.groups())
        )

    def describe(self) -> dict[str, object]:
        """``whois --json``."""
        from datetime import UTC, datetime

        def instant(seconds: float) -> str:
            return datetime.fromtimestamp(seconds, tz=UTC).isoformat().replace("+00:00", "Z")

        return {
            "person": self.name,
            "emails": self.emails,
            "ids": self.ids(),
            "accounts": [
                {
                    "source": a.source,
                    "scope": a.scope,
                    "id": a.account_id,
                    "name": a.display_name,
                    "status": a.status,
                    "team": a.team,
                }
                for a in self.accounts
            ],
            "groups": sorted(self.groups()),
            "grants": [{"group": g, "because": b} for g, b in sorted(self.groups().items())],
            "channels": [
                {"source": a.source, "id": c.id, "name": c.name, "private": c.private} for a, c in self.channels()
            ],
            "synced": {source: instant(at) for source, at in sorted(self.synced.items())},
        }


def find_person(store: DirectoryStore, query: str, links: Links | None = None) -> Person:
    """The person an email, an account id or ``source:id`` names (:class:`UnknownPerson` when none does)."""
    links = links or Links()
    query = query.strip()
    if not query:
        raise UnknownPerson("no person given")
    seen: dict[tuple[str, str, str], Account] = {}
    pending: set[str] = set()
    used_links = False
    source, _, bare = query.partition(":")
    if bare and "@" not in source:
        start = store.by_id(bare, source)
        pending |= links.linked(query)
    else:
        start = store.by_id(query) + store.by_email(query)
        pending |= links.linked(_normal(query))
        if "@" in query:
            pending.add(_normal(query))
    used_links = bool(pending - {_normal(query)})
    frontier = list(start)
    looked_up: set[str] = set()
    while frontier or pending:
        for account in frontier:
            if account.key() in seen:
                continue
            seen[account.key()] = account
            for identifier in _identifiers(account):
                extra = links.linked(identifier)
                if extra - _identifiers(account):
                    used_links = True
                pending |= (extra | {identifier}) - looked_up
        frontier = []
        for identifier in sorted(pending - looked_up):
            looked_up.add(identifier)
            src, _, account_id = identifier.partition(":")
            if "@" in identifier and not account_id:
                frontier.extend(store.by_email(identifier))
            elif account_id:
                frontier.extend(store.by_id(account_id, src))
        pending -= looked_up
    if not seen:
        raise UnknownPerson(f"no account in the directory has the email or id {query!r}")
    accounts = sorted(seen.values(), key=lambda a: (a.source, a.status in INACTIVE, a.scope, a.account_id))
    synced = {r.source: r.synced_at for r in store.syncs() if r.source in {a.source for a in accounts}}
    return Person(accounts, used_links, synced)


def people_of(accounts: Iterable[Account]) -> int:
    """How many people a set of accounts makes when joined by email alone (for sync summaries)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for account in accounts:
        node = f"{account.source}:{account.scope}:{account.account_id}"
        find(node)
        if account.email:
            parent[find(node)] = find(f"email:{account.email}")
    return len({find(n) for n in list(parent) if not n.startswith("email:")})
