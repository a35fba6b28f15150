"""A small, stdlib-only emulator of the Slack Web API for tests and benchmarks.

It serves the methods the Slack ETL calls (``auth.test``, ``conversations.list/history/replies/members/info``,
``users.list/info`` and ``chat.postMessage``) from a mutable in-memory
:class:`~rag_pipeline_tests.kit.emulators.slack_workspace.SlackWorkspace` on
``http://127.0.0.1:<port>/api/``, so the real ``slack_sdk.WebClient`` can be pointed at it with ``base_url``.

What it reproduces (shapes and semantics of the real Web API as slack-sdk sees them):

* POST form bodies, JSON bodies and GET query strings, merged; booleans as ``"1"``/``"0"``; every response is
  JSON with ``"ok"``; errors are ``{"ok": false, "error": ...}`` with HTTP 200 (``SlackApiError`` in the SDK).
* Bearer-token auth (``invalid_auth``), per-method scopes (``missing_scope`` with ``needed``/``provided``),
  ``channel_not_found`` for unknown channels and private channels the bot is not in, ``not_in_channel`` for public
  channels it has not joined.
* Cursor pagination (``response_metadata.next_cursor``, ``""`` on the last page) and a ``limit`` capped at
  ``max_limit`` (``max_limit=15`` emulates the 2025 regime for non-Marketplace apps).
* ``users.list`` / ``users.info``: users as stored (``deleted``, ``is_bot``, ``is_restricted``,
  ``is_ultra_restricted`` kept, missing flags defaulted to false); ``profile.email`` only with the
  ``users:read.email`` scope, as Slack serves it. ``users.list`` lists the workspace's own users, not external ones.
* ``conversations.history``: top-level messages plus ``thread_broadcast`` replies, newest first, with thread
  summaries (``reply_count``, ``reply_users``, ``reply_users_count``, ``latest_reply``) computed live from the
  current replies; ``conversations.replies``: the root (first page only) then the replies, oldest first.
* Fault injection: HTTP 429 with ``Retry-After``, 500/503, and dropped connections; every request is recorded.
  Records that lack fields the real API always sends (:meth:`SlackEmulator.hide_fields`: a channel without
  ``is_private``, a user without ``is_restricted`` or a team).
  Faulty servers (for the paging guards and timeouts): ``repeat_cursor`` (the first page again, with the same
  ``next_cursor`` every time, as a proxy caching one page), ``empty_pages`` (no items but ``has_more`` and a fresh
  cursor, forever), ``silent`` (accepts the request and never answers) and ``trickle`` (answers one byte per
  ``trickle_interval`` seconds); a fault can be limited to one channel and last for every request (``count=None``).
* Opt-in rate limits per method (``rate_limits={"conversations.history": RateLimit(1, 60.0)}``): at most ``requests``
  answered requests per window of wall time, others get HTTP 429 ``ratelimited`` with ``Retry-After`` (e.g. the 2025
  "1 request per minute" regime, with a window shrunk to something a test or benchmark can wait for).

Usage::

    with SlackEmulator(crafted_workspace(), max_limit=15) as emulator:
        client = WebClient(token="xoxb-test-token", base_url=emulator.base_url)
        emulator.inject("429", method="conversations.history")
        ...
        assert [r.method for r in emulator.calls()] == [...]
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rag_pipeline_tests.kit.emulators.http import LocalHttpService, send_json
from rag_pipeline_tests.kit.emulators.slack_workspace import (
    BOT_ID,
    BOT_NAME,
    BOT_USER_ID,
    EMAIL_SCOPE,
    Channel,
    SlackWorkspace,
    is_reply,
    ts_key,
)

__all__ = [
    "FAULT_KINDS",
    "RateLimit",
    "RecordedRequest",
    "SlackApiFailure",
    "SlackEmulator",
]

FAULT_KINDS = frozenset({"429", "500", "503", "drop", "repeat_cursor", "empty_pages", "silent", "trickle"})
# What a repeating server hands out as its next cursor (a valid-looking cursor no real page ever gives).
REPEATED_CURSOR = "cmVwZWF0OmZvcmV2ZXI="
# The key that holds a paged method's items, emptied by ``empty_pages``.
_PAGED_ITEMS = {
    "conversations.list": "channels",
    "conversations.history": "messages",
    "conversations.replies": "messages",
    "conversations.members": "members",
    "users.list": "members",
}
# Thread summary fields the server computes; stored values (e.g. from an export) are never trusted.
_REPLY_FIELDS = ("reply_count", "reply_users", "reply_users_count", "latest_reply", "replies")


@dataclass
class RecordedRequest:
    """One request as the emulator saw it."""

    method: str
    params: dict[str, str]
    status: int  # HTTP status sent, or 0 for a dropped connection


class SlackApiFailure(Exception):
    """Raised inside a method handler: answered as ``{"ok": false, "error": ..., **extra}`` with HTTP 200."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass
class _Fault:
    kind: str
    method: str | None
    remaining: int | None  # None: every matching request
    retry_after: int
    channel: str | None = None


@dataclass(frozen=True)
class RateLimit:
    """At most ``requests`` answered requests to a method per ``window`` seconds of wall time. A window opens with
    the first request answered after the previous window ended; requests over the limit inside it get HTTP 429
    ``{"ok": false, "error": "ratelimited"}`` with ``Retry-After: retry_after`` (None: the seconds left in the
    window, rounded up, as Slack does). Rate-limited requests do not count against the window."""

    requests: int = 1
    window: float = 60.0
    retry_after: int | None = None

    def __post_init__(self) -> None:
        if self.requests < 1 or self.window <= 0:
            raise ValueError("a rate limit needs requests >= 1 and window > 0")


class SlackEmulator(LocalHttpService):
    """Serves a :class:`SlackWorkspace` over HTTP on 127.0.0.1 (a free port) as the Slack Web API."""

    def __init__(
        self,
        workspace: SlackWorkspace,
        *,
        max_limit: int = 1000,
        default_limit: int = 100,
        token: str = "xoxb-test-token",
        rate_limits: Mapping[str, RateLimit] | None = None,
        silent_seconds: float = 300.0,
        trickle_interval: float = 1.0,
    ) -> None:
        self.workspace = workspace
        self.rate_limits: dict[str, RateLimit] = dict(rate_limits or {})
        self._windows: dict[str, tuple[float, int]] = {}  # method -> (window start, requests answered in it)
        self.max_limit = max_limit
        self.default_limit = default_limit
        self.token = token
        self.requests: list[RecordedRequest] = []
        self._faults: list[_Fault] = []
        # A silent or trickling answer ends at the latest when the emulator stops, so a test never waits on it.
        self.silent_seconds = silent_seconds
        self.trickle_interval = trickle_interval
        self._stopping = threading.Event()
        self._empty_pages = 0
        # (record kind, record id or None for all) -> field names left out of served records (hide_fields).
        self._hidden: dict[tuple[str, str | None], set[str]] = {}
        self._record_lock = threading.Lock()
        super().__init__()
        self._last_post_ts = Decimal(0)
        self._handlers = {
            "auth.test": self._auth_test,
            "conversations.list": self._conversations_list,
            "conversations.history": self._conversations_history,
            "conversations.replies": self._conversations_replies,
            "conversations.members": self._conversations_members,
            "conversations.info": self._conversations_info,
            "users.list": self._users_list,
            "users.info": self._users_info,
            "chat.postMessage": self._chat_post_message,
        }

    # -- lifecycle ----------------------------------------------------------------------------------------------------

    thread_name = "slack-emulator"
    server_name = "SlackEmulator/1.0"
    http_protocol = "HTTP/1.0"  # one request per connection, as the emulator has always served
    http_methods = ("GET", "POST")

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/api/`` (only once started)."""
        return f"{self.origin}/api/"

    def start(self) -> None:
        self._stopping.clear()
        super().start()

    def stop(self) -> None:
        # Wakes the handlers of silent and trickling faults before the server waits for its threads.
        self._stopping.set()
        super().stop()

    # -- faults and recording -----------------------------------------------------------------------------------

    def inject(
        self,
        kind: str,
        *,
        method: str | None = None,
        count: int | None = 1,
        retry_after: int = 0,
        channel: str | None = None,
    ) -> None:
        """Make the next ``count`` requests (None: every one; to ``method`` and about ``channel`` if given, else any)
        fail: ``"429"`` (with ``Retry-After: retry_after``), ``"500"``/``"503"``, ``"drop"`` (socket closed without a
        response), ``"repeat_cursor"``/``"empty_pages"`` (paged methods only), ``"silent"`` (no answer for
        ``silent_seconds``) or ``"trickle"`` (the answer one byte per ``trickle_interval``). Injections queue up; a
        request takes the first pending one that matches it."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
        if count is not None and count < 1:
            raise ValueError("count must be >= 1 (or None for every request)")
        if kind in ("repeat_cursor", "empty_pages") and method not in _PAGED_ITEMS:
            raise ValueError(f"{kind} needs a paged method: one of {sorted(_PAGED_ITEMS)}")
        with self._record_lock:
            self._faults.append(_Fault(kind, method, count, retry_after, channel))

    def clear_faults(self) -> None:
        """Forget every pending injected fault."""
        with self._record_lock:
            self._faults.clear()

    def hide_fields(self, kind: str, *names: str, id: str | None = None) -> None:
        """Leave ``names`` out of every served ``kind`` record (``"user"``: ``users.list``/``users.info``;
        ``"channel"``: ``conversations.list``/``conversations.info``), or only of the one with ``id``: a faulty
        answer that omits fields the real API always sends (``is_private``, ``is_restricted``...). A dotted name
        reaches into a nested object (``"profile.team"``). :meth:`clear_faults` does not undo it;
        ``hide_fields(kind, id=...)`` with no names does."""
        if kind not in ("user", "channel"):
            raise ValueError(f"kind must be 'user' or 'channel', got {kind!r}")
        with self._record_lock:
            if names:
                self._hidden.setdefault((kind, id), set()).update(names)
            else:
                self._hidden.pop((kind, id), None)

    def _hide(self, kind: str, record: dict[str, Any]) -> dict[str, Any]:
        with self._record_lock:
            names = self._hidden.get((kind, None), set()) | self._hidden.get((kind, record.get("id")), set())
        for name in names:
            *path, last = name.split(".")
            target: Any = record
            for part in path:
                target = target.get(part) if isinstance(target, dict) else None
            if isinstance(target, dict):
                target.pop(last, None)
        return record

    def calls(self, method: str | None = None) -> list[RecordedRequest]:
        """Requests answered with HTTP 200 (API errors included), optionally only those of one method."""
        with self._record_lock:
            return [r for r in self.requests if r.status == 200 and (method is None or r.method == method)]

    def _take_fault(self, method: str, params: dict[str, str]) -> _Fault | None:
        with self._record_lock:
            for fault in self._faults:
                if (fault.method is None or fault.method == method) and (
                    fault.channel is None or fault.channel == params.get("channel")
                ):
                    if fault.remaining is not None:
                        fault.remaining -= 1
                        if fault.remaining <= 0:
                            self._faults.remove(fault)
                    return fault
        return None

    def _rate_limited(self, method: str) -> int | None:
        """The Retry-After seconds when ``method`` is over its rate limit now, else None (the request counts)."""
        limit = self.rate_limits.get(method)
        if limit is None:
            return None
        now = time.monotonic()
        with self._record_lock:
            start, answered = self._windows.get(method, (now, 0))
            if now - start >= limit.window:
                start, answered = now, 0
            if answered >= limit.requests:
                left = limit.window - (now - start)
                return limit.retry_after if limit.retry_after is not None else max(math.ceil(left), 1)
            self._windows[method] = (start, answered + 1)
        return None

    def _record(self, method: str, params: dict[str, str]) -> RecordedRequest:
        record = RecordedRequest(method=method, params=params, status=0)
        with self._record_lock:
            self.requests.append(record)
        return record

    # -- HTTP plumbing ------------------------------------------------------------------------------------------

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        split = urlsplit(request.path)
        params = _parse_params(split.query, request)
        method = split.path[len("/api/") :] if split.path.startswith("/api/") else split.path
        record = self._record(method, params)

        fault = self._take_fault(method, params)
        if fault is not None:
            if fault.kind in ("repeat_cursor", "empty_pages", "trickle"):
                self._serve_faulty_answer(request, record, method, params, fault.kind)
                return
            if fault.kind == "silent":
                # Reads the request, then says nothing until the client gives up (or the emulator stops).
                self._stopping.wait(self.silent_seconds)
                request.close_connection = True
                return
            if fault.kind == "drop":
                record.status = 0
                request.close_connection = True
                return
            if fault.kind == "429":
                body = {"ok": False, "error": "ratelimited"}
                _respond(request, record, 429, body, {"Retry-After": str(fault.retry_after)})
            else:
                _respond(request, record, int(fault.kind), {"ok": False, "error": "internal_error"})
            return
        retry_after = self._rate_limited(method)
        if retry_after is not None:
            _respond(request, record, 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)})
            return

        if not split.path.startswith("/api/"):
            _respond(request, record, 404, {"ok": False, "error": "unknown_method"})
            return
        _respond(request, record, 200, self._dispatch(method, params, request.headers.get("Authorization")))

    def _serve_faulty_answer(
        self, request: BaseHTTPRequestHandler, record: RecordedRequest, method: str, params: dict[str, str], kind: str
    ) -> None:
        authorization = request.headers.get("Authorization")
        if kind == "trickle":
            body = json.dumps(self._dispatch(method, params, authorization)).encode()
            record.status = 200
            request.send_response(200)
            request.send_header("Content-Type", "application/json; charset=utf-8")
            request.send_header("Content-Length", str(len(body)))
            request.end_headers()
            for offset in range(len(body)):
                try:
                    request.wfile.write(body[offset : offset + 1])
                    request.wfile.flush()
                except OSError:  # the client gave up
                    return
                if self._stopping.wait(self.trickle_interval):
                    return
            return
        # The cursor is dropped so the server answers its first page, as a caching proxy or a cursor bug would.
        answer = self._dispatch(method, {k: v for k, v in params.items() if k != "cursor"}, authorization)
        if answer.get("ok"):
            if kind == "repeat_cursor":
                cursor = REPEATED_CURSOR
            else:
                answer[_PAGED_ITEMS[method]] = []
                with self._record_lock:
                    self._empty_pages += 1
                    cursor = _encode_cursor("empty", self._empty_pages)
            answer["has_more"] = True
            answer["response_metadata"] = {"next_cursor": cursor}
        _respond(request, record, 200, answer)

    def _dispatch(self, method: str, params: dict[str, str], authorization: str | None) -> dict[str, Any]:
        token = params.get("token")
        if authorization and authorization.startswith("Bearer "):
            token = authorization[len("Bearer ") :].strip()
        if token != self.token:
            return {"ok": False, "error": "invalid_auth"}
        handler = self._handlers.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        try:
            with self.workspace.lock:
                return {"ok": True, **handler(params)}
        except SlackApiFailure as failure:
            return {"ok": False, "error": failure.error, **failure.extra}

    # -- helpers for handlers -----------------------------------------------------------------------------------

    def _require(self, scope: str) -> None:
        if scope not in self.workspace.scopes:
            raise SlackApiFailure("missing_scope", needed=scope, provided=",".join(sorted(self.workspace.scopes)))

    def _limit(self, params: dict[str, str]) -> int:
        raw = params.get("limit")
        try:
            requested = int(raw) if raw not in (None, "") else 0
        except ValueError:
            raise SlackApiFailure("invalid_limit") from None
        return min(requested if requested > 0 else self.default_limit, self.max_limit)

    def _visible_channel(self, params: dict[str, str], *, read: bool, check_scope: bool = True) -> Channel:
        """The requested channel after the visibility and scope checks (``read``: message history access)."""
        channel_id = params.get("channel")
        if not channel_id:
            raise SlackApiFailure("channel_not_found")
        channel = self.workspace.channels.get(channel_id)
        if channel is None or (channel.is_private and not channel.is_member):
            raise SlackApiFailure("channel_not_found")
        if check_scope:
            if read:
                self._require("groups:history" if channel.is_private else "channels:history")
            else:
                self._require("groups:read" if channel.is_private else "channels:read")
        if read and not channel.is_member:
            raise SlackApiFailure("not_in_channel")
        return channel

    def _channel_object(self, channel: Channel) -> dict[str, Any]:
        team = self.workspace.team_id
        shared_teams = [team]
        for member in channel.members:
            other = self.workspace.external_users.get(member, {}).get("team_id")
            if other and other not in shared_teams:
                shared_teams.append(other)
        legacy_group = channel.is_private and channel.id.startswith("G")
        record = {
            "id": channel.id,
            "name": channel.name,
            "name_normalized": channel.name,
            "is_channel": not legacy_group,
            "is_group": legacy_group,
            "is_im": False,
            "is_mpim": False,
            "is_private": channel.is_private,
            "is_archived": channel.is_archived,
            "is_general": channel.name == "general",
            "is_member": channel.is_member,
            "is_ext_shared": channel.is_ext_shared,
            "is_shared": channel.is_ext_shared,
            "is_org_shared": False,
            "is_pending_ext_shared": False,
            "shared_team_ids": shared_teams,
            "context_team_id": team,
            "num_members": len(channel.members),
            "created": channel.created,
            "creator": channel.members[0] if channel.members else "",
            "unlinked": 0,
            "topic": {"value": "", "creator": "", "last_set": 0},
            "purpose": {"value": channel.purpose, "creator": "", "last_set": 0},
            "previous_names": [],
        }
        return self._hide("channel", record)

    def _render(
        self,
        channel: Channel,
        message: dict[str, Any],
        index: dict[str, list[dict[str, Any]]],
        *,
        with_root: bool = False,
    ) -> dict[str, Any]:
        """A served copy of a stored message, thread summaries computed from the current replies (``index``:
        :meth:`Channel.thread_index`)."""
        out = copy.deepcopy(message)
        for key in _REPLY_FIELDS:
            out.pop(key, None)
        if is_reply(message):
            if with_root and message.get("subtype") == "thread_broadcast":
                root = channel.messages.get(message["thread_ts"])
                if root is not None:
                    out["root"] = self._render(channel, root, index)
            return out
        replies = index.get(message["ts"])
        if replies:
            users: list[str] = []
            for reply in replies:
                author = reply.get("user") or reply.get("bot_id")
                if author and author not in users:
                    users.append(author)
            out["thread_ts"] = message["ts"]
            out["reply_count"] = len(replies)
            out["reply_users"] = users
            out["reply_users_count"] = len(users)
            out["latest_reply"] = replies[-1]["ts"]
        return out

    # -- methods --------------------------------------------------------------------------------------------------

    def _auth_test(self, params: dict[str, str]) -> dict[str, Any]:
        ws = self.workspace
        return {
            "url": f"https://{ws.domain}/",
            "team": ws.team_name,
            "user": BOT_NAME,
            "team_id": ws.team_id,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _conversations_list(self, params: dict[str, str]) -> dict[str, Any]:
        types = [t.strip() for t in (params.get("types") or "public_channel").split(",") if t.strip()]
        needed = {"public_channel": "channels:read", "private_channel": "groups:read", "im": "im:read"}
        needed["mpim"] = "mpim:read"
        for kind in types:
            if kind not in needed:
                raise SlackApiFailure("invalid_types")
            self._require(needed[kind])
        exclude_archived = _truthy(params.get("exclude_archived"))
        channels = [
            c
            for c in self.workspace.channels.values()
            if (("private_channel" in types and c.is_member) if c.is_private else ("public_channel" in types))
            and not (exclude_archived and c.is_archived)
        ]
        page, next_cursor = _offset_page(channels, params.get("cursor"), self._limit(params), "team")
        return {
            "channels": [self._channel_object(c) for c in page],
            "response_metadata": {"next_cursor": next_cursor},
        }

    def _conversations_info(self, params: dict[str, str]) -> dict[str, Any]:
        return {"channel": self._channel_object(self._visible_channel(params, read=False))}

    def _conversations_members(self, params: dict[str, str]) -> dict[str, Any]:
        channel = self._visible_channel(params, read=False)
        page, next_cursor = _offset_page(channel.members, params.get("cursor"), self._limit(params), "user_id")
        return {"members": page, "response_metadata": {"next_cursor": next_cursor}}

    def _conversations_history(self, params: dict[str, str]) -> dict[str, Any]:
        channel = self._visible_channel(params, read=True)
        in_range = _range_filter(params)
        candidates = [
            m
            for m in channel.messages.values()
            if (not is_reply(m) or m.get("subtype") == "thread_broadcast") and in_range(m["ts"])
        ]
        candidates.sort(key=lambda m: ts_key(m["ts"]), reverse=True)
        index = channel.thread_index()
        cursor = _decode_cursor(params.get("cursor"), "next_ts")
        if cursor is not None:
            bound = _parse_ts(cursor, "invalid_cursor")
            candidates = [m for m in candidates if ts_key(m["ts"]) <= bound]
        limit = self._limit(params)
        page, rest = candidates[:limit], candidates[limit:]
        return {
            "messages": [self._render(channel, m, index, with_root=True) for m in page],
            "has_more": bool(rest),
            "pin_count": 0,
            "channel_actions_ts": None,
            "channel_actions_count": 0,
            "response_metadata": {"next_cursor": _encode_cursor("next_ts", rest[0]["ts"]) if rest else ""},
        }

    def _conversations_replies(self, params: dict[str, str]) -> dict[str, Any]:
        channel = self._visible_channel(params, read=True)
        ts = params.get("ts")
        if not ts:
            raise SlackApiFailure("thread_not_found")
        message = channel.messages.get(ts)
        if message is None:
            raise SlackApiFailure("thread_not_found")
        root = channel.messages.get(message["thread_ts"]) if is_reply(message) else message
        if root is None:
            raise SlackApiFailure("thread_not_found")
        in_range = _range_filter(params)
        thread = channel.replies_of(root["ts"])
        index = {root["ts"]: thread}
        replies = [r for r in thread if in_range(r["ts"])]
        limit = self._limit(params)
        cursor = _decode_cursor(params.get("cursor"), "next_ts")
        if cursor is None:
            page = [root, *replies[: max(limit - 1, 0)]]
            rest = replies[max(limit - 1, 0) :]
        else:
            bound = _parse_ts(cursor, "invalid_cursor")
            remaining = [r for r in replies if ts_key(r["ts"]) >= bound]
            page, rest = remaining[:limit], remaining[limit:]
        return {
            "messages": [self._render(channel, m, index) for m in page],
            "has_more": bool(rest),
            "response_metadata": {"next_cursor": _encode_cursor("next_ts", rest[0]["ts"]) if rest else ""},
        }

    def _users_list(self, params: dict[str, str]) -> dict[str, Any]:
        self._require("users:read")
        page, next_cursor = _offset_page(self.workspace.users, params.get("cursor"), self._limit(params), "users")
        return {
            "members": [self._user_object(u) for u in page],
            "cache_ts": int(time.time()),
            "response_metadata": {"next_cursor": next_cursor},
        }

    def _users_info(self, params: dict[str, str]) -> dict[str, Any]:
        self._require("users:read")
        user = self.workspace.user(params.get("user") or "")
        if user is None:
            raise SlackApiFailure("user_not_found")
        return {"user": self._user_object(user)}

    def _user_object(self, user: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(user)
        out.setdefault("team_id", self.workspace.team_id)
        out.setdefault("deleted", False)
        out.setdefault("is_bot", False)
        out.setdefault("is_app_user", False)
        out.setdefault("is_restricted", False)
        out.setdefault("is_ultra_restricted", False)
        out.setdefault("real_name", out.get("name", ""))
        profile = out.setdefault("profile", {})
        if EMAIL_SCOPE not in self.workspace.scopes:
            profile.pop("email", None)  # Slack leaves the key out, it does not blank it
        profile.setdefault("display_name", "")
        profile.setdefault("real_name", out["real_name"])
        profile.setdefault("team", out["team_id"])
        return self._hide("user", out)

    def _chat_post_message(self, params: dict[str, str]) -> dict[str, Any]:
        self._require("chat:write")
        channel = self._visible_channel(params, read=False, check_scope=False)
        if not channel.is_member:
            raise SlackApiFailure("not_in_channel")
        if channel.is_archived:
            raise SlackApiFailure("is_archived")
        text = params.get("text", "")
        blocks = params.get("blocks")
        if not text and not blocks:
            raise SlackApiFailure("no_text")
        # A fresh, strictly increasing ts (two posts within one microsecond must not collide).
        now = Decimal(f"{time.time():.6f}")
        self._last_post_ts = max(now, self._last_post_ts + Decimal("0.000001"))
        ts = f"{self._last_post_ts:.6f}"
        message: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "text": text,
            "ts": ts,
            "team": self.workspace.team_id,
        }
        if blocks:
            try:
                message["blocks"] = json.loads(blocks)
            except ValueError:
                raise SlackApiFailure("invalid_blocks") from None
        thread_ts = params.get("thread_ts")
        if thread_ts:
            root = channel.messages.get(thread_ts)
            if root is None or is_reply(root):
                raise SlackApiFailure("thread_not_found")
            message["thread_ts"] = thread_ts
            if _truthy(params.get("reply_broadcast")):
                message["subtype"] = "thread_broadcast"
        stored = self.workspace.post(channel.id, message)
        index = {thread_ts: channel.replies_of(thread_ts)} if thread_ts else {}
        return {"channel": channel.id, "ts": ts, "message": self._render(channel, stored, index)}


# -- module helpers -------------------------------------------------------------------------------------------------


def _parse_params(query: str, request: BaseHTTPRequestHandler) -> dict[str, str]:
    """Query string and body (form-encoded or JSON) merged; the body wins; single values as strings."""
    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    length = int(request.headers.get("Content-Length") or 0)
    raw = request.rfile.read(length) if length > 0 else b""
    if not raw:
        return params
    content_type = (request.headers.get("Content-Type") or "").lower()
    if content_type.startswith("application/json"):
        try:
            body = json.loads(raw)
        except ValueError:
            return params
        if isinstance(body, dict):
            params.update({k: _stringify(v) for k, v in body.items() if v is not None})
        return params
    params.update({k: v[-1] for k, v in parse_qs(raw.decode("utf-8"), keep_blank_values=True).items()})
    return params


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value)


def _respond(
    request: BaseHTTPRequestHandler,
    record: RecordedRequest,
    status: int,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> None:
    record.status = status
    send_json(request, status, body, "application/json; charset=utf-8", headers)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes")


def _parse_ts(value: str, error: str) -> Decimal:
    try:
        return ts_key(value)
    except (InvalidOperation, ValueError):
        raise SlackApiFailure(error) from None


def _range_filter(params: dict[str, str]) -> Any:
    """``oldest < ts < latest`` (``<=`` with ``inclusive``); oldest defaults to 0, latest to now."""
    oldest = _parse_ts(params.get("oldest") or "0", "invalid_ts_oldest")
    latest = _parse_ts(params["latest"], "invalid_ts_latest") if params.get("latest") else Decimal(f"{time.time():.6f}")
    inclusive = _truthy(params.get("inclusive"))

    def in_range(ts: str) -> bool:
        key = ts_key(ts)
        if inclusive:
            return oldest <= key <= latest
        return oldest < key < latest

    return in_range


def _encode_cursor(kind: str, value: str | int) -> str:
    return base64.b64encode(f"{kind}:{value}".encode()).decode()


def _decode_cursor(cursor: str | None, kind: str) -> str | None:
    if not cursor:
        return None
    try:
        decoded = base64.b64decode(cursor.encode(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise SlackApiFailure("invalid_cursor") from None
    prefix, _, value = decoded.partition(":")
    if prefix != kind or not value:
        raise SlackApiFailure("invalid_cursor")
    return value


def _offset_page(items: list[Any], cursor: str | None, limit: int, kind: str) -> tuple[list[Any], str]:
    """One page of ``items`` from the offset in ``cursor``, and the next cursor (``""`` on the last page)."""
    raw = _decode_cursor(cursor, kind)
    try:
        offset = int(raw) if raw is not None else 0
    except ValueError:
        raise SlackApiFailure("invalid_cursor") from None
    if offset < 0:
        raise SlackApiFailure("invalid_cursor")
    page = list(items[offset : offset + limit])
    end = offset + len(page)
    return page, _encode_cursor(kind, end) if end < len(items) else ""
