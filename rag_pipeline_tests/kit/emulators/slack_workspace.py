"""The Slack workspace model behind the Slack Web API emulator (:mod:`rag_pipeline_tests.kit.emulators.slack_api`).

A mutable, in-memory :class:`SlackWorkspace`: team, users (plus external Slack Connect users), channels
(:class:`Channel`) with their flags, members and messages keyed by ``ts``. Change it through
:meth:`SlackWorkspace.post`, ``edit`` and ``delete`` (edits keep ``ts`` and set ``edited``; deleting a thread root
that still has replies leaves a ``tombstone``), and round-trip it through a Slack export folder
(:meth:`SlackWorkspace.write_export`, :meth:`SlackWorkspace.from_export`). For directory and ACL tests, users are
added with :meth:`SlackWorkspace.add_user` (email, deleted, bot, multi- or single-channel guest, external team) and
channel membership changes with :meth:`SlackWorkspace.add_member` / :meth:`SlackWorkspace.remove_member`. The bot's
identity (``BOT_USER_ID``, ``BOT_ID``, ``BOT_NAME``) and the default OAuth scopes live here too. Stdlib only.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

__all__ = [
    "BOT_ID",
    "BOT_NAME",
    "BOT_USER_ID",
    "DEFAULT_SCOPES",
    "EMAIL_SCOPE",
    "TOMBSTONE_TEXT",
    "Channel",
    "SlackWorkspace",
    "is_reply",
    "iter_messages",
    "ts_key",
]

DEFAULT_SCOPES: frozenset[str] = frozenset(
    {"channels:read", "channels:history", "groups:read", "groups:history", "users:read"}
)
# Without it Slack serves users with no ``profile.email``. Not a default scope: the scope errors' ``provided`` list is
# asserted verbatim by existing tests, so a test that wants emails adds it (``workspace.scopes.add(EMAIL_SCOPE)``).
EMAIL_SCOPE = "users:read.email"
BOT_USER_ID = "U0BOT00001"
BOT_ID = "B0BOT00001"
BOT_NAME = "rag-bot"
TOMBSTONE_TEXT = "This message was deleted."


@functools.lru_cache(maxsize=1 << 18)
def ts_key(ts: str) -> Decimal:
    return Decimal(ts)


def _utc_day(ts: str) -> str:
    return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%d")


def is_reply(message: dict[str, Any]) -> bool:
    thread_ts = message.get("thread_ts")
    return bool(thread_ts) and thread_ts != message["ts"]


@dataclass
class Channel:
    """A public or private channel: its flags, member ids and messages keyed by ``ts``."""

    id: str
    name: str
    is_private: bool = False
    is_archived: bool = False
    is_member: bool = True
    is_ext_shared: bool = False
    members: list[str] = field(default_factory=list)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    created: int = 0
    purpose: str = ""

    def replies_of(self, root_ts: str) -> list[dict[str, Any]]:
        """The stored replies of a thread (broadcasts included), oldest first."""
        replies = [m for m in self.messages.values() if m.get("thread_ts") == root_ts and m["ts"] != root_ts]
        return sorted(replies, key=lambda m: ts_key(m["ts"]))

    def thread_index(self) -> dict[str, list[dict[str, Any]]]:
        """Every thread's stored replies by root ts (one pass over the channel), oldest first."""
        index: dict[str, list[dict[str, Any]]] = {}
        for message in self.messages.values():
            if is_reply(message):
                index.setdefault(message["thread_ts"], []).append(message)
        for replies in index.values():
            replies.sort(key=lambda m: ts_key(m["ts"]))
        return index

    def sorted_messages(self) -> list[dict[str, Any]]:
        """Every stored message (roots and replies), oldest first."""
        return sorted(self.messages.values(), key=lambda m: ts_key(m["ts"]))


@dataclass
class SlackWorkspace:
    """Mutable state: team, users, channels with members and messages.

    Mutate it through :meth:`post`, :meth:`edit` and :meth:`delete` (or directly under :attr:`lock`) while an
    emulator serves it; the emulator holds the same lock while answering a request.
    """

    team_id: str
    domain: str  # e.g. "ubuntu.slack.com"
    team_name: str = ""
    users: list[dict[str, Any]] = field(default_factory=list)
    external_users: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, Channel] = field(default_factory=dict)
    scopes: set[str] = field(default_factory=lambda: set(DEFAULT_SCOPES))
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.team_name:
            self.team_name = self.domain.split(".", 1)[0]

    # -- building -----------------------------------------------------------------------------------------------

    def add_channel(
        self,
        id: str,
        name: str,
        *,
        is_private: bool = False,
        is_archived: bool = False,
        is_member: bool = True,
        is_ext_shared: bool = False,
        members: Iterable[str] = (),
        created: int = 0,
        purpose: str = "",
    ) -> Channel:
        """Add (or replace) a channel and return it."""
        channel = Channel(
            id=id,
            name=name,
            is_private=is_private,
            is_archived=is_archived,
            is_member=is_member,
            is_ext_shared=is_ext_shared,
            members=list(members),
            created=created,
            purpose=purpose,
        )
        with self.lock:
            self.channels[id] = channel
        return channel

    def channel(self, channel_id: str) -> Channel:
        """The channel with this id (``KeyError`` if unknown)."""
        return self.channels[channel_id]

    def add_user(
        self,
        id: str,
        name: str,
        *,
        email: str | None = None,
        deleted: bool = False,
        is_bot: bool = False,
        guest: str | None = None,
        team_id: str | None = None,
        real_name: str | None = None,
    ) -> dict[str, Any]:
        """Add (or replace, by id) a user and return the stored dict: ``profile = {"email" (when given),
        "display_name": name, "real_name"}``. ``guest``: None (a full member), ``"multi"`` (a multi-channel guest:
        ``is_restricted``) or ``"single"`` (a single-channel guest: ``is_restricted`` and ``is_ultra_restricted``, as
        Slack flags them). A ``team_id`` other than the workspace's makes an external (Slack Connect) user, kept in
        :attr:`external_users` and never listed by ``users.list``."""
        if guest not in (None, "multi", "single"):
            raise ValueError(f"guest must be None, 'multi' or 'single', got {guest!r}")
        shown_name = real_name if real_name is not None else name
        profile: dict[str, Any] = {"display_name": name, "real_name": shown_name}
        if email is not None:
            profile = {"email": email, **profile}
        user: dict[str, Any] = {
            "id": id,
            "name": name,
            "team_id": team_id or self.team_id,
            "deleted": deleted,
            "is_bot": is_bot,
            "is_restricted": guest is not None,
            "is_ultra_restricted": guest == "single",
            "real_name": shown_name,
            "profile": profile,
        }
        with self.lock:
            self.users[:] = [u for u in self.users if u.get("id") != id]
            self.external_users.pop(id, None)
            if user["team_id"] != self.team_id:
                self.external_users[id] = user
            else:
                self.users.append(user)
        return user

    def add_member(self, channel_id: str, user_id: str) -> None:
        """Make a user a member of a channel (no-op if already one)."""
        with self.lock:
            members = self.channels[channel_id].members
            if user_id not in members:
                members.append(user_id)

    def remove_member(self, channel_id: str, user_id: str) -> None:
        """Take a user out of a channel (no-op if not a member)."""
        with self.lock:
            members = self.channels[channel_id].members
            if user_id in members:
                members.remove(user_id)

    def user(self, user_id: str) -> dict[str, Any] | None:
        """A workspace user or an external (Slack Connect) user, else None."""
        for user in self.users:
            if user.get("id") == user_id:
                return user
        return self.external_users.get(user_id)

    def post(self, channel_id: str, message: dict[str, Any]) -> dict[str, Any]:
        """Store a copy of ``message`` (it needs a unique ``ts``; a reply carries ``thread_ts`` != ``ts`` of an
        existing root) and return the stored dict. ``type`` defaults to ``"message"``."""
        if "ts" not in message:
            raise ValueError("a message needs a 'ts'")
        stored = copy.deepcopy(message)
        stored.setdefault("type", "message")
        ts = str(stored["ts"])
        stored["ts"] = ts
        ts_key(ts)  # validates the format
        with self.lock:
            channel = self.channels[channel_id]
            if ts in channel.messages:
                raise ValueError(f"{channel_id} already has a message with ts {ts}")
            if is_reply(stored):
                root = channel.messages.get(stored["thread_ts"])
                if root is None or is_reply(root):
                    raise ValueError(f"reply {ts}: no thread root {stored['thread_ts']} in {channel_id}")
                stored.setdefault("parent_user_id", root.get("user"))
                root["thread_ts"] = root["ts"]
            channel.messages[ts] = stored
        return stored

    def edit(self, channel_id: str, ts: str, text: str, edited_ts: str, user: str | None = None) -> None:
        """Change a message's text: ``ts`` is unchanged, ``edited = {"user", "ts": edited_ts}``. Stored ``blocks``
        (which would show the old text) are dropped."""
        with self.lock:
            message = self.channels[channel_id].messages[ts]
            message["text"] = text
            message.pop("blocks", None)
            message["edited"] = {"user": user or message.get("user") or BOT_USER_ID, "ts": edited_ts}

    def delete(self, channel_id: str, ts: str) -> None:
        """Delete a message. A thread root that still has replies becomes a tombstone (its replies are kept);
        any other message is removed. Removing the last reply of a tombstoned root removes the tombstone too."""
        with self.lock:
            channel = self.channels[channel_id]
            message = channel.messages[ts]
            if not is_reply(message) and channel.replies_of(ts):
                channel.messages[ts] = {
                    "type": "message",
                    "subtype": "tombstone",
                    "text": TOMBSTONE_TEXT,
                    "user": "USLACKBOT",
                    "hidden": True,
                    "ts": ts,
                    "thread_ts": ts,
                }
                return
            del channel.messages[ts]
            if is_reply(message):
                root = channel.messages.get(message["thread_ts"])
                if root is not None and root.get("subtype") == "tombstone" and not channel.replies_of(root["ts"]):
                    del channel.messages[root["ts"]]

    # -- exports --------------------------------------------------------------------------------------------------

    def write_export(self, path: str | Path) -> None:
        """Write a Slack export folder: ``channels.json`` (public), ``groups.json`` (private, with members),
        ``mpims.json`` (multi-party IMs: always empty, the model has none), ``users.json`` (users and external users
        as stored, with ``team_id`` and the guest flags filled in where a stored user lacks them, as Slack writes
        them; profile emails included: an export is not limited by scopes) and
        ``<channel name>/<YYYY-MM-DD>.json`` holding every stored message (roots, replies, tombstones) of that UTC
        day, oldest first."""
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        with self.lock:
            public = [self._manifest(c) for c in self.channels.values() if not c.is_private]
            private = [self._manifest(c) for c in self.channels.values() if c.is_private]
            users = [self._exported_user(u) for u in (*self.users, *self.external_users.values())]
            (root / "channels.json").write_text(json.dumps(public, indent=1, ensure_ascii=False))
            (root / "groups.json").write_text(json.dumps(private, indent=1, ensure_ascii=False))
            (root / "mpims.json").write_text("[]")
            (root / "users.json").write_text(json.dumps(users, indent=1, ensure_ascii=False))
            for channel in self.channels.values():
                days: dict[str, list[dict[str, Any]]] = {}
                for message in channel.sorted_messages():
                    days.setdefault(_utc_day(message["ts"]), []).append(message)
                folder = root / channel.name
                folder.mkdir(exist_ok=True)
                for day, messages in days.items():
                    (folder / f"{day}.json").write_text(json.dumps(messages, indent=1, ensure_ascii=False))

    def _exported_user(self, user: dict[str, Any]) -> dict[str, Any]:
        """A user as Slack's export writes it: the team and the guest flags are always there (the Web API serves
        them the same way), so a stored user added without them is written as a member of this workspace."""
        out = dict(user)
        out.setdefault("team_id", self.team_id)
        out.setdefault("is_restricted", False)
        out.setdefault("is_ultra_restricted", False)
        return out

    @staticmethod
    def _manifest(channel: Channel) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": channel.id,
            "name": channel.name,
            "created": channel.created,
            "is_archived": channel.is_archived,
            "members": list(channel.members),
            "purpose": {"value": channel.purpose},
        }
        if channel.is_private:
            out["is_private"] = True
        if channel.is_ext_shared:
            out["is_ext_shared"] = True
        return out

    @classmethod
    def from_export(cls, path: str | Path, team_id: str, domain: str) -> SlackWorkspace:
        """Load a Slack export folder. Every channel gets ``is_member=True``; users whose ``team_id`` is another
        team's go to :attr:`external_users`. A message present in several day files (a broadcast) is kept once,
        the most recently edited copy."""
        root = Path(path)
        workspace = cls(team_id=team_id, domain=domain)
        users_file = root / "users.json"
        if users_file.exists():
            for user in json.loads(users_file.read_text()):
                if user.get("team_id") not in (None, "", team_id):
                    workspace.external_users[user["id"]] = user
                else:
                    workspace.users.append(user)
        for manifest, private in (("channels.json", False), ("groups.json", True)):
            manifest_file = root / manifest
            if not manifest_file.exists():
                continue
            for raw in json.loads(manifest_file.read_text()):
                purpose = raw.get("purpose")
                channel = workspace.add_channel(
                    raw["id"],
                    raw.get("name", raw["id"]),
                    is_private=private or bool(raw.get("is_private")),
                    is_archived=bool(raw.get("is_archived")),
                    is_member=True,
                    is_ext_shared=bool(raw.get("is_ext_shared")),
                    members=raw.get("members") or (),
                    created=int(raw.get("created") or 0),
                    purpose=purpose.get("value", "") if isinstance(purpose, dict) else str(purpose or ""),
                )
                folder = root / channel.name
                if not folder.is_dir():
                    folder = root / channel.id
                for day_file in sorted(folder.glob("*.json")) if folder.is_dir() else ():
                    for message in json.loads(day_file.read_text()):
                        previous = channel.messages.get(message["ts"])
                        if previous is None or _edited_key(message) >= _edited_key(previous):
                            channel.messages[message["ts"]] = message
        return workspace


def _edited_key(message: dict[str, Any]) -> Decimal:
    edited = message.get("edited") or {}
    return ts_key(edited.get("ts") or message["ts"])


def iter_messages(workspace: SlackWorkspace) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every stored message of a workspace as ``(channel_id, message)``, channel by channel, oldest first."""
    for channel in workspace.channels.values():
        for message in channel.sorted_messages():
            yield channel.id, message
