"""Who is in a Slack workspace and which channels they are in: from an export or from the Web API.

Groups follow the ACLs the Slack readers write (``slack_threads.SlackChannel.acl``): full members of the
workspace hold ``slack:<team>:members`` (the readers of public channels); guests, external (Slack Connect)
members, bots and deleted users hold no group. A private channel's threads name their members, and a
shared channel's name its external members, so those memberships are recorded per account (``channels``)
for ``whois`` and ``explain`` and compared with the index by the ACL refresh.

Guests are deliberately conservative: a public channel's ACL is the workspace group plus its external
members, so a guest who is a member of a public channel does not see it through this index (it would take
listing every public channel's members on every sync). ``explain`` says so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rag_pipeline.directory.accounts import (
    Account,
    AccountStatus,
    ChannelMembership,
    DirectorySnapshot,
    checked_account_id,
    checked_email,
)
from rag_pipeline.sources.identifiers import is_valid_container_id
from rag_pipeline.sources.problems import RecordProblem, describe, shown
from rag_pipeline.sources.slack.threads import user_display_name, workspace_group

SOURCE = "slack"
# Export manifests that list channels with their members: public, private, multi-party DMs.
_CHANNEL_MANIFESTS = (("channels.json", False), ("groups.json", True), ("mpims.json", True))


def slack_status(user: Mapping[str, Any], team_id: str) -> AccountStatus:
    """Where a ``users.list`` / ``users.json`` record stands in workspace ``team_id``."""
    if user.get("deleted"):
        return "deleted"
    if user.get("is_bot") or user.get("is_app_user") or user.get("id") == "USLACKBOT":
        return "bot"
    own_team = user.get("team_id") or (user.get("profile") or {}).get("team")
    if own_team and own_team != team_id:
        return "external"
    if user.get("is_restricted") or user.get("is_ultra_restricted"):
        return "guest"
    return "member"


def slack_account(user: Mapping[str, Any], team_id: str, where: str, problems: list[RecordProblem]) -> Account | None:
    """One user record as an account (None, with a problem, when it has no usable id)."""
    account_id = checked_account_id(user.get("id"), where, problems)
    if account_id is None:
        return None
    raw_profile = user.get("profile")
    profile: Mapping[str, Any] = raw_profile if isinstance(raw_profile, Mapping) else {}
    status = slack_status(user, team_id)
    return Account(
        source=SOURCE,
        scope=team_id,
        account_id=account_id,
        display_name=user_display_name({**user, "id": account_id}),
        email=checked_email(profile.get("email"), where, problems),
        status=status,
        groups={workspace_group(team_id): f"member of Slack workspace {team_id}"} if status == "member" else {},
        team=str(user.get("team_id") or profile.get("team") or team_id),
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
    from rag_pipeline.sources.slack.export import SlackExportReader

    snapshot = DirectorySnapshot(SOURCE, team_id, time.time() if now is None else now)
    reader = SlackExportReader(path, team_id)
    files = reader._files  # the export reader's safe view of the folder or zip (path checks included)
    # The reader has already reported the manifests' entries without an id and their channels with an
    # invalid one, in the same words the index run uses: those are taken over, not found a second time.
    problems = snapshot.problems
    problems.extend(reader.problems)
    for index, user in _manifest(files, "users.json", problems):
        if not isinstance(user.get("id"), str) or not user["id"]:
            continue
        account = slack_account(user, team_id, f"{files.where('users.json')}[{index}]", problems)
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


def read_api_directory(reader: Any, now: float | None = None) -> DirectorySnapshot:
    """The directory through the Web API (``reader``: a :class:`~rag_pipeline.sources.slack.api.SlackApiReader`):
    ``users.list`` (emails need the ``users:read.email`` scope), the private channels the app is in and shared
    channels with ``conversations.members``. Costs ceil(users / 200) + ceil(channels / 200) + one call per
    private or shared channel (more past 200 members)."""
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
        private, shared = bool(raw.get("is_private")), bool(raw.get("is_ext_shared"))
        if not (private or shared):
            continue
        channel_id = checked_account_id(raw.get("id"), "slack conversations.list entry", problems)
        if channel_id is None:
            continue
        members = reader.pages("conversations.members", "members", channel_id, channel=channel_id)
        name = raw["name"] if isinstance(raw.get("name"), str) else channel_id
        add_channel_members(snapshot, channel_id, name, private, list(members), shared)
    snapshot.api_calls = reader.stats.api_calls - calls_before
    return snapshot
