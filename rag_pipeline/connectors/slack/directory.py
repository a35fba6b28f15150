"""Who is in a Slack workspace and which channels they are in: from an export or from the Web API.

Groups follow the ACLs the Slack readers write (``slack_threads.SlackChannel.acl``): full members of the
workspace hold ``slack:<team>:members`` (the readers of public channels); guests, external (Slack Connect)
members, bots and deleted users hold no group. A private channel's threads name their members, and a
shared channel's name its external members, so those memberships are recorded per account (``channels``)
for ``whois`` and ``explain`` and compared with the index by the ACL refresh.

Guests are deliberately conservative: a public channel's ACL is the workspace group plus its external
members, so a guest who is a member of a public channel does not see it through this index (it would take
listing every public channel's members on every sync). ``explain`` says so.

Fail closed (issue 47): an account is a full member only when its record says so: ``is_restricted`` and
``is_ultra_restricted`` explicitly false and its team explicitly this workspace. A record without its restriction
flags counts as a guest, one without a team as an external member (neither holds the workspace group), and the
gap is a problem of the sync. A channel record that does not say whether it is private counts as private. A
channel whose members cannot be read is a problem; its previous members are kept (``previous``) and every other
change still applies.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.slack.export import export_marks_status, user_team
from rag_pipeline.connectors.slack.threads import user_display_name, workspace_group
from rag_pipeline.directory.accounts import (
    Account,
    AccountStatus,
    ChannelMembership,
    DirectorySnapshot,
    checked_account_id,
    checked_email,
)
from rag_pipeline.sources.identifiers import is_valid_container_id
from rag_pipeline.sources.paging import GuardTripped
from rag_pipeline.sources.problems import RecordProblem, SourceError, describe, shown

SOURCE = "slack"
# Export manifests that list channels with their members: public, private, multi-party DMs.
_CHANNEL_MANIFESTS = (("channels.json", False), ("groups.json", True), ("mpims.json", True))
# The flags that make an account a guest (multi-channel: is_restricted; single-channel: both).
_GUEST_FLAGS = ("is_restricted", "is_ultra_restricted")


def slack_status(user: Mapping[str, Any], team_id: str, *, unmarked_member: bool = False) -> AccountStatus:
    """Where a ``users.list`` / ``users.json`` record stands in workspace ``team_id``: a full member only when
    the record says it is one; without its restriction flags a guest, without a team an external member.
    ``unmarked_member``: records without a team or restriction flags are members (an export that carries
    none of those fields for any user; see :func:`read_export_directory`)."""
    return _status(user, team_id, unmarked_member)[0]


def _status(user: Mapping[str, Any], team_id: str, unmarked_member: bool) -> tuple[AccountStatus, str | None]:
    """The status, and what the record lacks that withheld full membership (a problem's reason; None when the
    record said everything its status needs)."""
    if user.get("deleted"):
        return "deleted", None
    if user.get("is_bot") or user.get("is_app_user") or user.get("id") == "USLACKBOT":
        return "bot", None
    own_team = user_team(user)
    if own_team is not None and own_team != team_id:
        return "external", None
    flags = {name: user.get(name) for name in _GUEST_FLAGS}
    if any(value is True for value in flags.values()):
        return "guest", None
    if unmarked_member:
        return "member", None
    # Neither flag says true; anything but an explicit false (absent, null, "no", 0) is not a member's record.
    # Guests and Slack Connect users must never hold the workspace group because a field was left out.
    unsaid = [f"{name} {'missing' if value is None else shown(value) + ' (not a boolean)'}"
              for name, value in flags.items() if value is not False]  # fmt: skip
    if own_team is None:
        return "external", "; ".join(["no team_id", *unsaid]) + ": counted as an external member (no workspace group)"
    if unsaid:
        return "guest", "; ".join(unsaid) + ": counted as a guest (no workspace group)"
    return "member", None


def slack_account(
    user: Mapping[str, Any],
    team_id: str,
    where: str,
    problems: list[RecordProblem],
    *,
    unmarked_member: bool = False,
) -> Account | None:
    """One user record as an account (None, with a problem, when it has no usable id); a record that lacks
    what full membership needs is kept as a guest or external account, with a problem naming what it lacks."""
    account_id = checked_account_id(user.get("id"), where, problems)
    if account_id is None:
        return None
    raw_profile = user.get("profile")
    profile: Mapping[str, Any] = raw_profile if isinstance(raw_profile, Mapping) else {}
    status, gap = _status(user, team_id, unmarked_member)
    if gap is not None:
        problems.append(RecordProblem(where, gap))
    return Account(
        source=SOURCE,
        scope=team_id,
        account_id=account_id,
        display_name=user_display_name({**user, "id": account_id}),
        email=checked_email(profile.get("email"), where, problems),
        status=status,
        groups={workspace_group(team_id): f"member of Slack workspace {team_id}"} if status == "member" else {},
        team=user_team(user) or (team_id if unmarked_member else None),
    )


def add_channel_members(
    snapshot: DirectorySnapshot, channel_id: str, name: str, private: bool, members: Iterable[str], shared: bool
) -> None:
    """Record a channel's readers as the Slack readers write its ACL: every member of a private channel, the
    external members of a shared one (members outside the workspace's user list count as external, the rule
    the live reader applies); a plain public channel names nobody. A private-channel member no user record
    names is kept as a ``named`` account so `whois` still finds the membership."""
    readers: list[str] = []
    for member in dict.fromkeys(m for m in members if isinstance(m, str) and m):
        known = snapshot.accounts.get(member)
        if not private:
            if not shared or (known is not None and known.status != "external"):
                continue
            if known is None:
                snapshot.add(Account(SOURCE, snapshot.scope, member, status="external"))
        elif known is None:
            snapshot.add(Account(SOURCE, snapshot.scope, member, status="named"))
        readers.append(member)
        snapshot.join(member, ChannelMembership(channel_id, name, private))
    if private or shared:
        snapshot.channel_members[channel_id] = (name, private, tuple(readers))


def read_export_directory(path: str | Path, team_id: str, now: float | None = None) -> DirectorySnapshot:
    """The directory of a Slack export: ``users.json`` and the members of ``channels.json``, ``groups.json``
    and ``mpims.json``. Zipped exports are read as the export reader reads them."""
    from rag_pipeline.connectors.slack.export import SlackExportReader

    snapshot = DirectorySnapshot(SOURCE, team_id, time.time() if now is None else now)
    reader = SlackExportReader(path, team_id)
    files = reader._files  # the export reader's safe view of the folder or zip (path checks included)
    # The reader has already reported the manifests' entries without an id and their channels with an
    # invalid one, in the same words the index run uses: those are taken over, not found a second time.
    problems = snapshot.problems
    problems.extend(reader.problems)
    users = list(_manifest(files, "users.json", problems))
    # An export whose users.json says nothing of teams or guests for anyone (the bundled Ubuntu export, converted
    # from IRC logs, has neither field for any of its 925 users) cannot tell guests from members: its users are
    # members, as before issue 47, or none of them could read a public channel. One record that carries either
    # field means the export does say, and then every record must (as the Web API's always do).
    unmarked = not export_marks_status(user for _, user in users)
    for index, user in users:
        if not isinstance(user.get("id"), str) or not user["id"]:
            continue
        where = f"{files.where('users.json')}[{index}]"
        account = slack_account(user, team_id, where, problems, unmarked_member=unmarked)
        if account is not None:
            snapshot.add(account)
    for manifest, private in _CHANNEL_MANIFESTS:
        for index, raw in _manifest(files, manifest, problems):
            where = f"{files.where(manifest)}[{index}]"
            raw_id = raw.get("id")
            if not is_valid_container_id(raw_id) or not isinstance(raw_id, str):
                if manifest == "mpims.json":  # the export reader does not read this one
                    problems.append(RecordProblem(where, f"channel id {shown(raw_id)} is not valid; not read"))
                continue
            channel_id = raw_id
            members = raw.get("members")
            if members is not None and not isinstance(members, list):
                if manifest == "mpims.json":
                    problems.append(RecordProblem(where, f"members {shown(members)} is not a list; none kept"))
                members = []
            is_private = private or bool(raw.get("is_private"))
            name = raw["name"] if isinstance(raw.get("name"), str) else channel_id
            add_channel_members(snapshot, channel_id, name, is_private, members or (), bool(raw.get("is_ext_shared")))
    return snapshot


def _manifest(files: Any, name: str, problems: list[RecordProblem]) -> Iterator[tuple[int, dict[str, Any]]]:
    if not files.exists(name):
        return
    try:
        entries = json.loads(files.read_text(name, problems))
    except Exception as exc:  # unreadable or not JSON: this manifest's problem, the rest is still read
        problems.append(RecordProblem(files.where(name), f"unreadable: {describe(exc)}"))
        return
    if not isinstance(entries, list):
        problems.append(RecordProblem(files.where(name), "not a JSON list; nothing read from it"))
        return
    for index, entry in enumerate(entries):
        if isinstance(entry, dict):
            yield index, entry
        else:
            problems.append(RecordProblem(f"{files.where(name)}[{index}]", f"not an object: {shown(entry)}"))


def read_api_directory(reader: Any, now: float | None = None, previous: Any | None = None) -> DirectorySnapshot:
    """The directory through the Web API (``reader``: a :class:`~rag_pipeline.connectors.slack.api.SlackApiReader`):
    ``users.list`` (emails need the ``users:read.email`` scope), the private channels the app is in and shared
    channels with ``conversations.members``. Costs ceil(users / 200) + ceil(channels / 200) + one call per
    private or shared channel (more past 200 members).

    A channel whose members cannot be read (an API error, a paging guard) is a problem and does not stop the
    sync: every other channel's change (a revocation) still applies. It keeps the members ``previous`` (the
    :class:`~rag_pipeline.directory.store.DirectoryStore` synced so far, read only) holds for it; without them
    it is left out of the snapshot, so the index keeps the ACL its threads have and the next sync that reads it
    compares it as a new channel. A failure of ``users.list`` or ``conversations.list`` fails the whole sync."""
    team_id = reader.team_id
    snapshot = DirectorySnapshot(SOURCE, team_id, time.time() if now is None else now)
    calls_before = reader.stats.api_calls
    problems = snapshot.problems
    for index, user in enumerate(reader.pages("users.list", "members")):
        if not isinstance(user, dict):
            problems.append(RecordProblem(f"slack users.list entry {index + 1}", f"not an object: {shown(user)}"))
            continue
        account = slack_account(
            user, team_id, f"slack users.list entry {index + 1} ({shown(user.get('id'))})", problems
        )
        if account is not None:
            snapshot.add(account)
    types = "public_channel,private_channel"
    for raw in reader.pages("conversations.list", "channels", types=types, exclude_archived=False):
        if not isinstance(raw, dict):
            continue
        raw_private = raw.get("is_private")
        # A record that does not say is private: only members are named, never the whole workspace.
        private, shared = raw_private is not False, bool(raw.get("is_ext_shared"))
        if not (private or shared):
            continue
        channel_id = checked_account_id(raw.get("id"), "slack conversations.list entry", problems)
        if channel_id is None:
            continue
        name = raw["name"] if isinstance(raw.get("name"), str) else channel_id
        if not isinstance(raw_private, bool):
            said = "no is_private field" if "is_private" not in raw else f"is_private {shown(raw_private)}"
            problems.append(
                RecordProblem(f"slack channel #{name} ({channel_id})", f"{said}: counted as a private channel")
            )
        try:
            members = list(reader.pages("conversations.members", "members", channel_id, channel=channel_id))
        except (SourceError, GuardTripped) as exc:  # SlackAccessError and the paging guards
            _keep_previous(snapshot, previous, channel_id, name, describe(exc))
            continue
        add_channel_members(snapshot, channel_id, name, private, members, shared)
    snapshot.api_calls = reader.stats.api_calls - calls_before
    return snapshot


def _keep_previous(snapshot: DirectorySnapshot, previous: Any | None, channel_id: str, name: str, why: str) -> None:
    """A channel whose members could not be read: its members as ``previous`` last recorded them (the index
    then sees no change for it), or nothing (the index keeps its threads' ACL until a sync reads them)."""
    kept = previous.channel(SOURCE, channel_id) if previous is not None else None
    if kept is None:
        outcome = "no previous members known; its threads keep the ACL they have"
    else:
        old_name, private, readers = kept
        snapshot.channel_members[channel_id] = (old_name, private, readers)
        for member in readers:
            if member not in snapshot.accounts:
                snapshot.add(Account(SOURCE, snapshot.scope, member, status="named" if private else "external"))
            snapshot.join(member, ChannelMembership(channel_id, old_name, private))
        outcome = f"kept the {len(readers)} member(s) of the last sync"
    snapshot.problems.append(
        RecordProblem(
            f"slack channel #{name} ({channel_id})", f"members not read ({why}); {outcome}; read again next sync"
        )
    )
