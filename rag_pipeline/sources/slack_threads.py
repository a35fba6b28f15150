"""Slack messages -> thread documents: the rules every Slack reader (export or Web API) shares.

A thread is one document (a message without replies is a thread of one). Both readers hand raw
message dicts to :class:`ThreadDocumentBuilder`, so the same thread gives the same ``Document``
whichever way it was read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rag_pipeline.sources.document import Acl, Document, content_hash, epoch_to_datetime
from rag_pipeline.text.clean import clean_text
from rag_pipeline.text.slack_markup import slack_to_text

SOURCE = "slack"
# Messages that carry what people wrote. Everything else (joins, leaves, topic/purpose/name
# changes, pins, bot messages, ...) is system noise and dropped.
CONTENT_SUBTYPES = frozenset({None, "thread_broadcast", "me_message", "file_share", "tombstone"})


def workspace_group(team_id: str) -> str:
    """ACL group of everyone in the workspace (readers of public channels)."""
    return f"slack:{team_id}:members"


def thread_document_id(team_id: str, channel_id: str, thread_ts: str) -> str:
    return f"slack:{team_id}:{channel_id}:{thread_ts}"


@dataclass(frozen=True)
class SlackChannel:
    """A channel as both readers see it; ``external_members`` are Slack Connect users of other orgs."""

    id: str
    name: str
    is_private: bool = False
    is_archived: bool = False
    members: tuple[str, ...] = ()
    external_members: tuple[str, ...] = ()

    def acl(self, team_id: str) -> Acl:
        """Private channel: its members. Public: the workspace, plus external members of a shared channel."""
        if self.is_private:
            return Acl(users=self.members)
        return Acl(users=self.external_members, groups=(workspace_group(team_id),))


def is_content(msg: Mapping[str, Any]) -> bool:
    """True for messages people wrote; system subtypes and bot/app messages are dropped."""
    return msg.get("subtype") in CONTENT_SUBTYPES and not msg.get("bot_id")


def valid_ts(ts: Any) -> bool:
    try:
        float(ts)
    except (TypeError, ValueError):
        return False
    return True


def edited_ts(msg: Mapping[str, Any]) -> float:
    edited = msg.get("edited") or {}
    try:
        return float(edited.get("ts") or 0)
    except (TypeError, ValueError):
        return 0.0


def user_display_name(user: Mapping[str, Any]) -> str:
    """The name shown for a user record of ``users.list`` / ``users.json``."""
    profile = user.get("profile") or {}
    name: str = (
        profile.get("display_name")
        or user.get("real_name")
        or profile.get("real_name")
        or user.get("name")
        or user["id"]
    )
    return name


def group_threads(messages: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Mapping[str, Any]]]:
    """Content messages grouped by thread ts, deduplicated by ts (the most recently edited copy wins).

    A broadcast reply shows up in the channel and in its thread; a thread fetched from the API
    can repeat its root on later pages.
    """
    threads: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for msg in messages:
        if not is_content(msg):
            continue
        thread_ts = msg.get("thread_ts") or msg["ts"]
        previous = threads[thread_ts].get(msg["ts"])
        if previous is None or edited_ts(msg) > edited_ts(previous):
            threads[thread_ts][msg["ts"]] = msg
    return threads


def activity_times(by_ts: Mapping[str, Mapping[str, Any]]) -> list[float]:
    """Every moment something happened in a thread: posts and edits."""
    times = [float(ts) for ts in by_ts]
    times.extend(t for t in (edited_ts(m) for m in by_ts.values()) if t)
    return times


class ThreadDocumentBuilder:
    """Builds the document of one thread from its messages."""

    def __init__(
        self,
        team_id: str,
        workspace_domain: str | None,
        user_name: Callable[[str], str | None],
        channel_name: Callable[[str], str | None],
    ) -> None:
        self.team_id = team_id
        self.workspace_domain = workspace_domain
        self._user_name = user_name
        self._channel_name = channel_name

    def build(self, channel: SlackChannel, thread_ts: str, by_ts: Mapping[str, Mapping[str, Any]]) -> Document | None:
        """The thread's document, or None when nothing readable is left (a deleted message without replies)."""
        ordered = [by_ts[ts] for ts in sorted(by_ts, key=float)]
        root = by_ts.get(thread_ts)
        root_deleted = root is not None and root.get("subtype") == "tombstone"
        lines: list[str] = []
        authors: list[str] = []
        for msg in ordered:
            if msg.get("subtype") == "tombstone":
                continue
            author = self._author(msg)
            text = clean_text(slack_to_text(msg.get("text") or "", self._user_name, self._channel_name))
            if not text:
                continue
            lines.append(f"{author}: {text}")
            if author not in authors:
                authors.append(author)
        if not lines:
            return None
        version = max(max(float(m["ts"]), float(m.get("latest_reply") or 0), edited_ts(m)) for m in ordered)
        body = "\n".join(lines)
        title_source = lines[0].split(": ", 1)[-1]
        return Document(
            id=thread_document_id(self.team_id, channel.id, thread_ts),
            source=SOURCE,
            container=channel.id,
            title=f"#{channel.name}: {title_source[:100]}",
            text=body,
            url=self._permalink(channel.id, thread_ts),
            authors=tuple(authors),
            created=epoch_to_datetime(float(thread_ts)),
            updated=epoch_to_datetime(version),
            version=version,
            content_hash=content_hash(body),
            acl=channel.acl(self.team_id),
            metadata={
                "channel_name": channel.name,
                "thread_ts": thread_ts,
                "message_count": len(lines),
                "root_deleted": root_deleted,
                "private": channel.is_private,
            },
        )

    def _author(self, msg: Mapping[str, Any]) -> str:
        uid = msg.get("user") or "unknown"
        profile = msg.get("user_profile") or {}
        return self._user_name(uid) or msg.get("user_name") or profile.get("display_name") or uid

    def _permalink(self, channel_id: str, thread_ts: str) -> str | None:
        if not self.workspace_domain:
            return None
        return f"https://{self.workspace_domain}/archives/{channel_id}/p{thread_ts.replace('.', '')}"
