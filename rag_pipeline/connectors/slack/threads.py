"""Slack messages -> thread documents: the rules every Slack reader (export or Web API) shares.

A thread is one document (a message without replies is a thread of one). Both readers hand raw
message dicts to :class:`ThreadDocumentBuilder`, so the same thread gives the same ``Document``
whichever way it was read.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rag_pipeline.connectors.slack.markup import slack_to_text
from rag_pipeline.sources.document import Acl, Document, content_hash, epoch_to_datetime
from rag_pipeline.sources.identifiers import check_container_id
from rag_pipeline.sources.problems import RecordError, shown
from rag_pipeline.text.clean import clean_text, clean_title

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
    subtype = msg.get("subtype")
    return (subtype is None or isinstance(subtype, str)) and subtype in CONTENT_SUBTYPES and not msg.get("bot_id")


# Slack timestamps are strings of epoch seconds with microseconds ("1709251200.000100"); they are message
# ids as well as times and end up in document ids and permalinks. JSON numbers, "inf", "1e20", "-5" and
# anything past 10 integer digits (year 2286) are not timestamps.
_SLACK_TS = re.compile(r"\d{1,10}(?:\.\d{1,9})?")


def parse_slack_ts(value: Any, field: str = "ts") -> float:
    """Epoch seconds of a Slack timestamp string; ValueError naming ``field`` for anything else."""
    if not isinstance(value, str) or _SLACK_TS.fullmatch(value) is None:
        raise ValueError(f"{field} {shown(value)} is not a Slack timestamp (a string like '1709251200.000100')")
    return float(value)


def valid_ts(ts: Any) -> bool:
    try:
        parse_slack_ts(ts)
    except ValueError:
        return False
    return True


def _optional_ts(value: Any) -> float:
    """A timestamp that may be missing or malformed (an edit's time, ``latest_reply``): 0 when unusable, so
    a bad edit marker moves nothing instead of losing the message."""
    try:
        return parse_slack_ts(value)
    except ValueError:
        return 0.0


def edited_ts(msg: Mapping[str, Any]) -> float:
    edited = msg.get("edited")
    return _optional_ts(edited.get("ts")) if isinstance(edited, Mapping) else 0.0


def checked_message(msg: Any) -> tuple[dict[str, Any], list[str]]:
    """A message fit for :func:`group_threads` and :class:`ThreadDocumentBuilder`, and what was dropped from
    it. ValueError when it cannot be read at all (not an object; ``ts``, ``thread_ts``, ``subtype`` or
    ``text`` of the wrong kind); fields that only decorate a message (``edited``, ``latest_reply``, ``user``,
    ``user_profile``) are dropped when malformed, each with a note, and the message is kept."""
    if not isinstance(msg, dict):
        raise ValueError(f"message is not a JSON object: {shown(msg)}")
    parse_slack_ts(msg.get("ts"), "ts")
    if msg.get("thread_ts") is not None:
        parse_slack_ts(msg["thread_ts"], "thread_ts")
    for name in ("subtype", "text"):
        if msg.get(name) is not None and not isinstance(msg[name], str):
            raise ValueError(f"{name} {shown(msg[name])} is not a string")
    fixed = dict(msg)
    notes: list[str] = []
    edited = msg.get("edited")
    if edited is not None and not (isinstance(edited, dict) and valid_ts(edited.get("ts"))):
        notes.append(f"edited {shown(edited)} is not an edit record; the edit is ignored")
        del fixed["edited"]
    if msg.get("latest_reply") is not None and not valid_ts(msg["latest_reply"]):
        notes.append(f"latest_reply {shown(msg['latest_reply'])} is not a Slack timestamp; ignored")
        del fixed["latest_reply"]
    for name, kind in (("user", str), ("user_name", str), ("user_profile", dict)):
        if msg.get(name) is not None and not isinstance(msg[name], kind):
            notes.append(f"{name} {shown(msg[name])} is malformed; ignored")
            del fixed[name]
    return fixed, notes


def user_display_name(user: Mapping[str, Any]) -> str:
    """The name shown for a user record of ``users.list`` / ``users.json`` (one clean line: a name is shown
    in titles and before every message)."""
    profile = user.get("profile")
    profile = profile if isinstance(profile, Mapping) else {}
    for candidate in (profile.get("display_name"), user.get("real_name"), profile.get("real_name"), user.get("name")):
        name = clean_title(candidate) if isinstance(candidate, str) else ""
        if name:
            return name
    return str(user["id"])


def group_threads(messages: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Mapping[str, Any]]]:
    """Content messages grouped by thread ts, deduplicated by ts (the most recently edited copy wins).

    A broadcast reply shows up in the channel and in its thread; a thread fetched from the API
    can repeat its root on later pages.
    """
    threads: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for msg in messages:
        if not isinstance(msg, Mapping) or not is_content(msg):
            continue
        ts, thread_ts = msg.get("ts"), msg.get("thread_ts") or msg.get("ts")
        if not (isinstance(ts, str) and isinstance(thread_ts, str) and valid_ts(ts) and valid_ts(thread_ts)):
            # No thread or message id to file it under; the export reader reports such messages with their
            # file and index before they get here.
            continue
        previous = threads[thread_ts].get(ts)
        if previous is None or edited_ts(msg) > edited_ts(previous):
            threads[thread_ts][ts] = msg
    return threads


def activity_times(by_ts: Mapping[str, Mapping[str, Any]]) -> list[float]:
    """Every moment something happened in a thread: posts and edits."""
    times = [parse_slack_ts(ts) for ts in by_ts]
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
        """The thread's document, or None when nothing readable is left (a deleted message without replies).

        Malformed data raises KeyError, TypeError or ValueError (a :class:`RecordError` for anything else), the
        exceptions both readers catch around one thread: one bad thread never ends a read."""
        try:
            return self._build(channel, thread_ts, by_ts)
        except (KeyError, TypeError, ValueError):
            raise
        except Exception as exc:  # RecursionError, AttributeError...: still this thread's problem alone
            raise RecordError(f"{type(exc).__name__}: {exc}") from exc

    def _build(self, channel: SlackChannel, thread_ts: str, by_ts: Mapping[str, Mapping[str, Any]]) -> Document | None:
        # The channel id becomes a partition key and a path component: a reader that did not check it at
        # entry (or a crafted listing) must not get it that far.
        check_container_id(channel.id, "Slack channel id")
        created = epoch_to_datetime(parse_slack_ts(thread_ts, "thread_ts"))
        ordered = [by_ts[ts] for ts in sorted(by_ts, key=parse_slack_ts)]
        root = by_ts.get(thread_ts)
        root_deleted = root is not None and root.get("subtype") == "tombstone"
        lines: list[str] = []
        authors: list[str] = []
        # Where the thread's question sits in the text, and who asked it: the thread miner's query and its author
        # (rag_pipeline/connectors/slack/mining.py). Only when the root itself opens the text.
        question: dict[str, Any] = {}
        for msg in ordered:
            if msg.get("subtype") == "tombstone":
                continue
            author = self._author(msg)
            text = clean_text(slack_to_text(msg.get("text") or "", self._user_name, self._channel_name))
            if not text:
                continue
            if not lines and msg.get("ts") == thread_ts and isinstance(msg.get("user"), str):
                start = len(author) + 2
                question = {"root_user": msg["user"], "root_span": [start, start + len(text)]}
            lines.append(f"{author}: {text}")
            if author not in authors:
                authors.append(author)
        if not lines:
            return None
        version = max(max(parse_slack_ts(m["ts"]), _optional_ts(m.get("latest_reply")), edited_ts(m)) for m in ordered)
        body = "\n".join(lines)
        title_source = lines[0].split(": ", 1)[-1]
        return Document(
            id=thread_document_id(self.team_id, channel.id, thread_ts),
            source=SOURCE,
            container=channel.id,
            title=clean_title(f"#{channel.name}: {title_source[:100]}"),
            text=body,
            url=self._permalink(channel.id, thread_ts),
            authors=tuple(authors),
            created=created,
            updated=epoch_to_datetime(version),
            version=version,
            content_hash=content_hash(body),
            acl=channel.acl(self.team_id),
            metadata={
                "channel_name": clean_title(channel.name),
                "thread_ts": thread_ts,
                "message_count": len(lines),
                "root_deleted": root_deleted,
                "private": channel.is_private,
                **question,
            },
        )

    def _author(self, msg: Mapping[str, Any]) -> str:
        user = msg.get("user")
        uid = user if isinstance(user, str) and user else "unknown"
        profile = msg.get("user_profile")
        profile = profile if isinstance(profile, Mapping) else {}
        for candidate in (self._user_name(uid), msg.get("user_name"), profile.get("display_name"), uid):
            # Names are shown before every line and in titles: one clean line, no bidi tricks.
            name = clean_title(candidate) if isinstance(candidate, str) else ""
            if name:
                return name
        return "unknown"

    def _permalink(self, channel_id: str, thread_ts: str) -> str | None:
        if not self.workspace_domain:
            return None
        return f"https://{self.workspace_domain}/archives/{channel_id}/p{thread_ts.replace('.', '')}"
