"""Who is on a Confluence site and what they may view: from the REST API, or from a dump plus a directory file.

Groups follow :mod:`~rag_pipeline.connectors.confluence.acl`: each account holds the Confluence groups it is in
(``confluence:<site>:group:<name>``), the spaces it may view (``…:space:<KEY>``, through a group or as a named
user) and the restricted chains it passes (``…:restricted:<pageId>``: the intersection over every restricted level
of the chain of users listed ∪ members of groups listed), each with its grant spelled out for ``explain``.

Live: per space, its view permissions (``space?expand=permissions``) and its pages' read restrictions (the
reconciliation listing); then the members of every group those name (``group/{name}/member``). A space or a group
that cannot be read is a problem and takes nothing away: the holds ``previous`` (the last snapshot's accounts)
had through it are kept, and nothing new is granted through it, until a sync reads it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.confluence.acl import (
    PREFIX,
    ReadRestriction,
    SpaceGrants,
    chain_members,
    confluence_group,
    group_grant,
    person_id,
    restricted_grant,
    restricted_group,
    restricted_levels,
    space_grant,
    space_group,
)
from rag_pipeline.connectors.confluence.document import obj_of
from rag_pipeline.connectors.confluence.dump import ConfluenceDumpReader, dump_chain
from rag_pipeline.directory.accounts import Account, DirectorySnapshot, checked_account_id, checked_email
from rag_pipeline.directory.directory_file import DirectoryFileFormat
from rag_pipeline.directory.directory_file import read_directory_file as read_file
from rag_pipeline.sources.paging import GuardTripped
from rag_pipeline.sources.problems import RecordProblem, SourceError, describe

SOURCE = "confluence"
FILE_FORMAT = DirectoryFileFormat(
    "Confluence directory file",
    "--confluence-directory, RAG_CONFLUENCE_DIRECTORY",
    "a group name, space:KEY or restricted:PAGEID",
)


def directory_file_group(site: str, entry: str) -> tuple[str, str]:
    """An entry of a directory file's ``groups`` column as (ACL group, grant): ``space:KEY`` (may view space KEY),
    ``restricted:PAGEID`` (passes page PAGEID's restricted chain) or a Confluence group name."""
    kind, _, name = entry.partition(":")
    if kind == "space" and name:
        return space_group(site, name), f"View space {name} (directory file)"
    if kind == "restricted" and name:
        return restricted_group(site, name), f"passes the view restrictions down to page {name} (directory file)"
    return confluence_group(site, entry), f"{group_grant(entry)} (directory file)"


def read_directory_file(path: str | Path, site: str, snapshot: DirectorySnapshot) -> None:
    """Add a CSV directory file (``account_id,email,groups``; groups separated by ``;``) to ``snapshot``. A row
    without an id is reported, the rest kept."""
    read_file(path, snapshot, lambda entry: directory_file_group(site, entry), FILE_FORMAT)


def grant_access(
    snapshot: DirectorySnapshot,
    spaces: Iterable[SpaceGrants],
    chains: Mapping[str, Sequence[ReadRestriction]],
    members_of: Mapping[str, Sequence[str]],
) -> None:
    """Grant the space groups (members of the groups holding view, and named users) and the restricted groups
    (``chains``: nearest restricted page id -> its chain) to the snapshot's accounts; users named only in a grant
    become ``named`` accounts."""
    site = snapshot.scope
    for name, members in members_of.items():
        for account_id in members:
            snapshot.grant(account_id, confluence_group(site, name), group_grant(name))
    for grants in spaces:
        target = space_group(site, grants.key)
        for group in grants.groups:
            for account_id in members_of.get(group, ()):
                snapshot.grant(account_id, target, space_grant(grants.key, group))
        told = {account_id: (name, email) for account_id, name, email in grants.people}
        for account_id in grants.users:
            _named(snapshot, account_id, *told.get(account_id, (None, None)))
            snapshot.grant(account_id, target, space_grant(grants.key))
    for page_id, chain in chains.items():
        for level in restricted_levels(chain):
            for account_id in level.users:
                _named(snapshot, account_id)
        target = restricted_group(site, page_id)
        for account_id in sorted(chain_members(chain, members_of)):
            snapshot.grant(account_id, target, restricted_grant(restricted_levels(chain)))


def _named(snapshot: DirectorySnapshot, account_id: str, name: str | None = None, email: str | None = None) -> None:
    """An account known from a grant naming it (with the name and email the grant gives, where it gives them)."""
    if account_id not in snapshot.accounts:
        checked = checked_email(email, f"confluence user {account_id}", snapshot.problems) if email else None
        snapshot.add(Account(SOURCE, snapshot.scope, account_id, name, checked, status="named"))


def restricted_chains(listed: Mapping[str, Any], chain_of: Any) -> tuple[dict[str, list[ReadRestriction]], list[str]]:
    """Each restricted chain by its nearest restricted page id (pages under the same nearest restricted page share
    one chain), and the ids of pages whose chain could not be read."""
    chains: dict[str, list[ReadRestriction]] = {}
    unknown: list[str] = []
    for page_id in listed:
        chain = chain_of(page_id)
        if chain is None:
            unknown.append(page_id)
            continue
        levels = restricted_levels(chain)
        if levels:
            chains.setdefault(levels[-1].content_id, chain)
    return chains, unknown


def _previous_accounts(previous: Any, site: str) -> list[Account]:
    """The accounts of this site in ``previous``: a DirectorySnapshot, a mapping or an iterable of accounts."""
    if previous is None:
        return []
    if isinstance(previous, DirectorySnapshot):
        found: Iterable[Any] = previous.accounts.values()
    elif isinstance(previous, Mapping):
        found = previous.values()
    else:
        found = previous
    return [a for a in found if isinstance(a, Account) and a.source == SOURCE and a.scope == site]


def keep_previous(snapshot: DirectorySnapshot, previous: Sequence[Account], keep: Any) -> int:
    """Give back every hold ``previous`` had on a group ``keep(group)`` says was not read; returns how many."""
    kept = 0
    for account in previous:
        for group, because in account.groups.items():
            if not keep(group):
                continue
            if account.account_id not in snapshot.accounts:
                snapshot.add(Account(SOURCE, snapshot.scope, account.account_id, account.display_name, account.email,
                                     account.status))  # fmt: skip
            before = group in snapshot.accounts[account.account_id].groups
            snapshot.grant(account.account_id, group, because)
            kept += not before and group in snapshot.accounts[account.account_id].groups
    return kept


def read_api_directory(
    reader: Any, previous: Any = None, spaces: Iterable[str] | None = None, now: float | None = None
) -> DirectorySnapshot:
    """The directory through the REST API (``reader``: a
    :class:`~rag_pipeline.connectors.confluence.api.ConfluenceApiReader`); ``spaces``: whose grants to resolve
    (default: every space the reader discovers); ``previous``: the last snapshot's accounts (a DirectorySnapshot or
    an iterable of Account), whose holds through a space or group that cannot be read now are kept."""
    site = reader.site
    snapshot = DirectorySnapshot(SOURCE, site, time.time() if now is None else now)
    calls_before = reader.stats.api_calls
    old = _previous_accounts(previous, site)
    keys = list(spaces) if spaces is not None else [s.key for s in reader.discover_spaces()]
    grants: list[SpaceGrants] = []
    chains: dict[str, list[ReadRestriction]] = {}
    failed_spaces: set[str] = set()
    read_pages: set[str] = set()
    unknown_pages: set[str] = set()
    for key in keys:
        try:
            space = reader.space_grants(key, fresh=True)
            listed = reader.page_ids(key)
        except (SourceError, GuardTripped) as exc:  # ConfluenceAccessError and the paging guards
            failed_spaces.add(key)
            snapshot.problems.append(
                RecordProblem(f"confluence space {key}", f"not read ({describe(exc)}); its previous holds are kept")
            )
            continue
        grants.append(space)
        read_pages.update(listed)
        found, unknown = restricted_chains(listed, lambda page_id, listed=listed: reader.listing_chain(listed, page_id))
        chains.update(found)
        if unknown:
            # Their documents fail closed; their chain's previous holds are kept below (nothing new granted).
            read_pages.difference_update(unknown)
            unknown_pages.update(unknown)
            snapshot.problems.append(
                RecordProblem(
                    f"confluence space {key}",
                    f"read restrictions of {len(unknown)} page(s) unknown ({', '.join(unknown[:5])}); "
                    "their restricted chains keep their previous holds",
                )
            )
    needed = {g for s in grants for g in s.groups} | {g for c in chains.values() for lvl in c for g in lvl.groups}
    members_of: dict[str, list[str]] = {}
    failed_groups: set[str] = set()
    for group in sorted(needed):
        try:
            members = reader.group_members(group)
        except (SourceError, GuardTripped) as exc:
            failed_groups.add(group)
            snapshot.problems.append(
                RecordProblem(f"confluence group {group}", f"members not read ({describe(exc)}); previous holds kept")
            )
            # The group's previous members stand in for it, so nothing granted through it is revoked.
            members_of[group] = [a.account_id for a in old if confluence_group(site, group) in a.groups]
            continue
        members_of[group] = []
        for number, user in enumerate(members, start=1):
            where = f"confluence group {group} member {number}"
            account_id = checked_account_id(person_id(user), where, snapshot.problems)
            if account_id is None:
                continue
            active = user.get("status", "current") in ("current", None) and user.get("active", True) is not False
            name = user.get("displayName") if isinstance(user.get("displayName"), str) else None
            email = checked_email(user.get("email"), where, snapshot.problems)
            if account_id not in snapshot.accounts:
                snapshot.add(Account(SOURCE, site, account_id, name, email, "member" if active else "inactive"))
            members_of[group].append(account_id)
    grant_access(snapshot, grants, chains, members_of)

    def not_read(group: str) -> bool:
        parts = group.split(":")
        if len(parts) < 4 or parts[0] != PREFIX or parts[1] != site:
            return False
        kind, name = parts[2], ":".join(parts[3:])
        if kind == "space":
            return name in failed_spaces
        if kind == "restricted":
            # A restricted chain of a page whose chain is unknown now, or of a space that was not read (which page
            # belongs to which space is not in the group's name: any page no space listed now).
            return name in unknown_pages or (bool(failed_spaces) and name not in read_pages)
        return kind == "group" and name in failed_groups

    kept = keep_previous(snapshot, old, not_read)
    if kept:
        snapshot.problems.append(RecordProblem("confluence directory", f"kept {kept} previous hold(s) not read now"))
    snapshot.api_calls = reader.stats.api_calls - calls_before
    return snapshot


def read_dump_directory(
    dump: str | Path, site: str, directory_file: str | Path | None = None, now: float | None = None
) -> DirectorySnapshot:
    """The directory of an offline Confluence site: the people its dump names (authors, restriction users), a
    directory file's memberships, and the space grants and restricted chains the dump holds, resolved through the
    directory file's group memberships."""
    snapshot = DirectorySnapshot(SOURCE, site, time.time() if now is None else now)
    if directory_file is not None:
        read_directory_file(directory_file, site, snapshot)
    contents = ConfluenceDumpReader(dump, site).contents()  # the dump's own bad lines are the index run's to report
    for location, page in contents.pages.values():
        for item in (page, *contents.comments.get(str(page.get("id")), ())):
            history = obj_of(item.get("history"))
            version = obj_of(item.get("version"))
            for person in (history.get("createdBy"), version.get("by")):
                account_id = person_id(person)
                if account_id is None or account_id in snapshot.accounts or not isinstance(person, Mapping):
                    continue
                checked = checked_account_id(account_id, location, snapshot.problems)
                if checked is None:
                    continue
                name = person.get("displayName") if isinstance(person.get("displayName"), str) else None
                email = checked_email(person.get("email"), location, snapshot.problems)
                snapshot.add(Account(SOURCE, site, checked, name, email, "named"))
    members_of: dict[str, list[str]] = {}
    for account in snapshot.accounts.values():
        for group in account.groups:
            name = group.removeprefix(f"{PREFIX}:{site}:group:")
            if name != group:
                members_of.setdefault(name, []).append(account.account_id)

    def chain_of(page_id: str) -> list[ReadRestriction] | None:
        try:
            return dump_chain(contents.pages[page_id][1], contents)[0]
        except (KeyError, ValueError):
            return None

    chains, _unknown = restricted_chains(contents.pages, chain_of)
    grant_access(snapshot, contents.spaces.values(), chains, members_of)
    return snapshot
