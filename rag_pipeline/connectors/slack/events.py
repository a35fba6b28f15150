"""Slack's Events API, received (``POST /events/slack``): the request's signature checked, the handshake answered,
the event turned into the sync that covers it.

A request is believed only when ``X-Slack-Signature`` is ``v0=`` HMAC-SHA256 of ``v0:{timestamp}:{body}`` under the
app's signing secret (slack-sdk's :class:`~slack_sdk.signature.SignatureVerifier`) and ``X-Slack-Request-Timestamp``
is within five minutes of now; a signature seen before is a replay and is refused (a retry of Slack's carries
``X-Slack-Retry-Num`` and is deduplicated by its ``event_id`` instead, like any delivery seen twice).

The event names the channel to sync, never what to index: what the bot reads through the Web API at sync time is
what is indexed, so an event for a channel the bot cannot read indexes nothing (the targeted sync skips it).

| event | the smallest sync covering it |
|---|---|
| ``message`` (posted, ``message_changed``, ``message_deleted``, thread replies, broadcasts) | the channel's recent window, then (for anything but a new top-level message) its reconciliation (which removes deleted messages); no directory refresh |
| ``channel_created``, ``channel_rename``, ``channel_archive``/``unarchive``, ``group_*`` alike | the channel |
| ``member_joined_channel``, ``member_left_channel`` | the channel; its sync refreshes the directory, which rewrites the channel's threads' ACL |
| ``user_change``, ``team_join``, ``subteam_*`` | the directory alone |
"""  # noqa: E501

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from slack_sdk.signature import Clock, SignatureVerifier

from rag_pipeline.sources.pushed import PushedChange, PushRefused, SeenDeliveries, SyncTarget, json_object

WINDOW_SECONDS = 300  # Slack's advice: refuse requests older than five minutes
CHANNEL_EVENTS = frozenset({
    "channel_created", "channel_rename", "channel_archive", "channel_unarchive", "channel_deleted",
    "group_rename", "group_archive", "group_unarchive", "group_deleted", "channel_history_changed",
    "group_history_changed", "member_joined_channel", "member_left_channel", "channel_shared", "channel_unshared",
})  # fmt: skip
DIRECTORY_EVENTS = frozenset({"user_change", "team_join", "subteam_updated", "subteam_members_changed"})
# ``message`` subtypes that change content alone: their targeted sync leaves the directory to the scheduled sync
# (any other subtype, e.g. ``channel_join``, refreshes it as before).
CONTENT_ONLY_MESSAGES = frozenset({
    "message", "message_changed", "message_deleted", "message_replied", "thread_broadcast", "bot_message",
    "me_message", "file_share",
})  # fmt: skip


class _Clock(Clock):
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


def channel_of(event: Mapping[str, Any]) -> str | None:
    """The channel id an event is about (``channel`` is an id, or an object with one)."""
    channel = event.get("channel")
    if isinstance(channel, dict):
        channel = channel.get("id")
    ok = isinstance(channel, str) and 0 < len(channel) <= 32 and channel.isascii() and channel.isalnum()
    return channel if ok else None


def targets_of(event: Mapping[str, Any]) -> list[SyncTarget]:
    """The syncs one inner ``event`` asks for (none for an event that cannot change the index)."""
    kind = str(event.get("type") or "")[:64]
    subtype = str(event.get("subtype") or "")[:64]
    if kind == "message" or kind in CHANNEL_EVENTS:
        channel = channel_of(event)
        content_only = kind == "message" and (subtype or kind) in CONTENT_ONLY_MESSAGES
        # A new top-level message: the channel's window reads it; nothing vanished, so no reconciliation.
        thread = event.get("thread_ts")
        posted = kind == "message" and not subtype and (thread is None or thread == event.get("ts"))
        target = SyncTarget(channel, subtype or kind, touches_directory=not content_only, adds_only=posted)
        return [target] if channel else []
    if kind in DIRECTORY_EVENTS:
        return [SyncTarget(None, kind)]
    return []


class SlackEvents:
    """The Events API receiver of one Slack app (``PushedChanges.receiver``), built from its signing secret."""

    max_body_bytes = 256 * 1024  # an event is a few KiB; Slack's longest message (40,000 characters) fits

    def __init__(self, signing_secret: str, clock: Callable[[], float] = time.time) -> None:
        self._verifier = SignatureVerifier(signing_secret, clock=_Clock(clock))
        self.clock = clock
        self.signatures = SeenDeliveries(seconds=2 * WINDOW_SECONDS)  # replays within the window

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Raise :class:`PushRefused` unless Slack signed ``body`` within the window and it is no replay
        (``headers`` lower-cased)."""
        timestamp = headers.get("x-slack-request-timestamp", "")
        signature = headers.get("x-slack-signature", "")
        if not timestamp.isdigit() or len(timestamp) > 12:
            raise PushRefused(401, "X-Slack-Request-Timestamp is missing or not a number", "X-Slack-Request-Timestamp")
        if abs(self.clock() - int(timestamp)) > WINDOW_SECONDS:
            raise PushRefused(
                401, "the request is older than five minutes (or the clocks disagree)", "X-Slack-Request-Timestamp"
            )
        if not signature.startswith("v0=") or not self._verifier.is_valid(body, timestamp, signature):
            raise PushRefused(
                401, "X-Slack-Signature does not match the body (RAG_SLACK_SIGNING_SECRET)", "X-Slack-Signature"
            )
        if not self.signatures.first_time(signature) and "x-slack-retry-num" not in headers:
            raise PushRefused(401, "this signed request was received before (a replay)", "X-Slack-Signature")

    def read(self, body: bytes, headers: Mapping[str, str], token: str | None = None) -> PushedChange:
        """Verify, then say what the request asks for: the handshake's challenge, or the event's syncs."""
        lowered = {k.lower(): v for k, v in headers.items()}
        self.verify(body, lowered)
        payload = json_object(body)
        kind = payload.get("type")
        if kind == "url_verification":
            challenge = payload.get("challenge")
            if not isinstance(challenge, str) or len(challenge) > 200:
                raise PushRefused(400, "url_verification without a challenge", "challenge")
            return PushedChange(None, reply={"challenge": challenge})
        if kind != "event_callback":
            return PushedChange(None, reply={"ok": True, "queued": 0, "note": f"{str(kind)[:40]!r} is not handled"})
        event, event_id = payload.get("event"), payload.get("event_id")
        if not isinstance(event, dict) or not isinstance(event_id, str) or not 0 < len(event_id) <= 64:
            raise PushRefused(400, "event_callback without an event or an event_id", "event")
        return PushedChange(event_id, targets_of(event))
