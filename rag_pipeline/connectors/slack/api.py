"""Slack Web API reader: channel discovery, (day x channel) thread reads and root listings for
reconciliation, through slack-sdk's ``WebClient`` with its retry handlers.

A (day D, channel C) read returns every thread of C with activity in [D, D+1): roots posted that
day, replies posted that day to roots up to ``lookback_days`` older (history only lists roots, so
late replies are found through the roots' ``latest_reply``), and edits. Each thread is fetched
whole and built by the same :class:`ThreadDocumentBuilder` as the export reader, so both readers
give identical documents for the same data.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.error import HTTPError, URLError

from pydantic import BaseModel, Field
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler, RetryHandler
from slack_sdk.http_retry.builtin_handlers import ServerErrorRetryHandler

from rag_pipeline.connectors.slack.threads import (
    SlackChannel,
    ThreadDocumentBuilder,
    activity_times,
    edited_ts,
    group_threads,
    user_display_name,
)
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.days import DAY, day_of, day_start
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.identifiers import (
    InvalidIdentifier,
    check_container_id,
    display_name,
    is_valid_container_id,
)
from rag_pipeline.sources.paging import DEFAULT_PAGE_CAP, GuardTripped, PageGuard, ReadBudget
from rag_pipeline.sources.problems import RecordProblem, SourceError, shown

# Slack's 2025 15-per-page cap concerns conversations.history/replies only; listings keep 200.
LISTING_PAGE_SIZE = 200
_MESSAGE_METHODS = frozenset({"conversations.history", "conversations.replies"})
# Slack's own limit on channel names; a longer "name" in a listing is not a name worth showing whole.
MAX_CHANNEL_NAME_LENGTH = 80


class SlackSyncSettings(BaseModel):
    """How the live connector reads a workspace."""

    page_size: int = Field(
        200, ge=1, le=1000, description="`limit` per page (Tier 3: 200; 15 for non-Marketplace apps)"
    )
    lookback_days: int = Field(30, ge=0, description="How far back roots are re-listed to find late replies and edits")
    rescan_thread_replies: bool = Field(
        False,
        description="Fetch the replies of every thread in the lookback (finds edits of replies in quiet threads; "
        "one extra call per thread)",
    )
    include_private: bool = Field(True, description="Read private channels the bot is a member of (groups:read)")
    include_archived: bool = Field(False, description="Discover archived channels too")
    channel_allow: tuple[str, ...] = Field((), description="Channel names or regexes to keep (empty: all)")
    channel_deny: tuple[str, ...] = Field((), description="Channel names or regexes to skip")
    page_cap: int = Field(DEFAULT_PAGE_CAP, ge=1, description="Pages per paged call before the read stops")
    requests_per_day: int | None = Field(
        None, ge=1, description="Requests (retries included) a channel's read may make per day it covers (None: any)"
    )
    seconds_per_day: float | None = Field(
        None, gt=0, description="Seconds a channel's read may take per day it covers (None: any)"
    )

    def wants(self, channel: SlackChannel) -> bool:
        """Whether discovery keeps a channel (deny wins over allow)."""
        if channel.is_archived and not self.include_archived:
            return False
        if channel.is_private and not self.include_private:
            return False
        if any(_name_matches(p, channel.name) for p in self.channel_deny):
            return False
        return not self.channel_allow or any(_name_matches(p, channel.name) for p in self.channel_allow)


def _name_matches(pattern: str, name: str) -> bool:
    return pattern.lstrip("#") == name or re.fullmatch(pattern, name) is not None


class _Deadline:
    """Aborts one HTTP attempt that has not completed within ``seconds``. urllib's ``timeout`` is per socket
    operation, so a server that trickles a byte every second never trips it (measured: a 1 s timeout against
    such a server read on for minutes); a timer that shuts the attempt's socket down bounds the whole attempt."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    # shutdown (not close) wakes a recv blocked in another thread; the socket may already be gone.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _WatchedHTTPConnection(http.client.HTTPConnection):
    """A connection whose socket the deadline watches once it is connected (for HTTPS, once the TLS handshake,
    bounded by the per-read timeout only, has wrapped it)."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()
        self._deadline.watch(self.sock)


# The same watch on HTTPS: the MRO runs HTTPSConnection's connect (the handshake) inside the watched one.
class _WatchedHTTPSConnection(_WatchedHTTPConnection, http.client.HTTPSConnection):
    pass


class _WatchedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WatchedHTTPConnection, req, deadline=self._deadline)  # type: ignore[arg-type]


class _WatchedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline, context: Any) -> None:
        super().__init__(context=context)
        self._deadline = deadline
        self._ssl_context = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(
            _WatchedHTTPSConnection,  # type: ignore[arg-type]
            req,
            context=self._ssl_context,
            deadline=self._deadline,
        )


class _CountingWebClient(WebClient):
    """A WebClient that counts the Web API methods it calls and bounds each HTTP attempt by ``timeout`` in all
    (connect, headers and body), not only per socket read."""

    def __init__(self, *args: Any, stats: ApiStats, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stats = stats

    def api_call(self, api_method: str, **kwargs: Any) -> Any:
        self.stats.calls[api_method] += 1
        return super().api_call(api_method, **kwargs)

    def _perform_urllib_http_request_internal(self, url: str, req: urllib.request.Request) -> dict[str, Any]:
        # slack-sdk 3.47's own version opens the request through urlopen with no hook for the socket; this one
        # does the same through handlers whose connections the deadline can shut down. A TimeoutError is not one
        # of the errors slack-sdk's connection retry handler retries, so a silent server costs one timeout.
        if not url.lower().startswith("http"):
            return super()._perform_urllib_http_request_internal(url, req)
        deadline = _Deadline(self.timeout)
        handlers: list[urllib.request.BaseHandler] = [
            _WatchedHTTPHandler(deadline),
            _WatchedHTTPSHandler(deadline, self.ssl),
        ]
        if self.proxy is not None:
            if not isinstance(self.proxy, str):
                raise SlackRequestError(f"Invalid proxy detected: {self.proxy} must be a str value")
            handlers.insert(0, urllib.request.ProxyHandler({"http": self.proxy, "https": self.proxy}))
        opener = urllib.request.build_opener(*handlers)
        try:
            with deadline:
                resp = opener.open(req, timeout=self.timeout)
                body: bytes = resp.read()
        except HTTPError:
            raise  # slack-sdk reads 429/5xx bodies itself and applies its retry handlers
        except Exception as exc:
            if deadline.expired:
                raise TimeoutError(f"no complete answer within {self.timeout} s") from exc
            raise
        if resp.headers.get_content_type() == "application/gzip":
            return {"status": resp.code, "headers": resp.headers, "body": body}
        charset = resp.headers.get_content_charset() or "utf-8"
        return {"status": resp.code, "headers": resp.headers, "body": body.decode(charset)}


def _counted(handler_cls: type[RetryHandler], kind: str, stats: ApiStats, max_retry_count: int) -> RetryHandler:
    class Counted(handler_cls):  # type: ignore[misc, valid-type]
        def prepare_for_next_attempt(self, **kwargs: Any) -> None:
            stats.retries[kind] += 1
            super().prepare_for_next_attempt(**kwargs)

    return Counted(max_retry_count=max_retry_count)


def build_web_client(
    token: str,
    base_url: str | None = None,
    *,
    stats: ApiStats | None = None,
    rate_limit_retries: int = 50,
    server_error_retries: int = 5,
    connection_retries: int = 5,
    timeout: int = 30,
) -> WebClient:
    """A WebClient that waits out 429s (Retry-After), retries 500/503 and dropped connections.

    slack-sdk's handlers share one attempt counter per call, so each limit is a cap on the call's
    total attempts when that kind of failure is seen; long backfills at 1 request/minute need many.
    """
    stats = stats if stats is not None else ApiStats()
    handlers = [
        _counted(ConnectionErrorRetryHandler, "connection", stats, connection_retries),
        _counted(RateLimitErrorRetryHandler, "rate_limited", stats, rate_limit_retries),
        _counted(ServerErrorRetryHandler, "server_error", stats, server_error_retries),
    ]
    kwargs: dict[str, Any] = {"token": token, "timeout": timeout, "retry_handlers": handlers, "stats": stats}
    if base_url:
        kwargs["base_url"] = base_url
    return _CountingWebClient(**kwargs)


class SlackAccessError(SourceError):
    """The workspace or one channel cannot be read; the message says what to change."""


def describe_slack_error(exc: SlackApiError, method: str, channel: str | None = None) -> str:
    """One actionable sentence for a Slack API error (never includes the token)."""
    data = exc.response.data if isinstance(exc.response.data, dict) else {}
    code = data.get("error") or f"HTTP {exc.response.status_code}"
    where = f"channel {channel}" if channel else "the workspace"
    advice = {
        "not_in_channel": f"the bot is not a member of {where}: invite it (/invite @your-app) or grant channels:join",
        "channel_not_found": f"{where} does not exist or is private and the bot is not a member: invite the bot to it",
        "missing_scope": f"the token lacks the scope {data.get('needed', '?')} needed for {method} on {where} "
        f"(it has: {data.get('provided', '?')}): add the scope to the Slack app and reinstall it",
        "invalid_auth": "Slack rejected the token (invalid_auth): check SLACK_BOT_TOKEN",
        "not_authed": "no Slack token was sent (not_authed): set SLACK_BOT_TOKEN",
        "token_revoked": "the Slack token was revoked: reinstall the app and update SLACK_BOT_TOKEN",
        "account_inactive": "the Slack app's account is inactive: reinstall the app and update SLACK_BOT_TOKEN",
        "ratelimited": f"{method} stayed rate limited after every retry for {where}: lower concurrency "
        "(pool slack_api) or raise rate_limit_retries",
    }.get(code, f"{method} failed for {where}: {code}")
    return f"Slack {code}: {advice}"


@dataclass
class ChannelDiscovery:
    """What channel discovery found: the channels to read, wanted public channels the bot is not a member of
    (unreadable until it is invited) and listings left out because their id cannot be a partition key."""

    channels: list[SlackChannel] = field(default_factory=list)
    not_member: list[SlackChannel] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)


@dataclass
class ChannelRead:
    """Threads of one channel for a set of days, and where each belongs."""

    documents: list[Document] = field(default_factory=list)
    partition_day: dict[str, str] = field(default_factory=dict)
    problems: list[RecordProblem] = field(default_factory=list)
    threads_fetched: int = 0


@dataclass(frozen=True)
class ThreadRoot:
    """A root as history lists it (tombstones included)."""

    ts: str
    reply_count: int
    deleted: bool
    message: Mapping[str, Any] = field(compare=False, repr=False, default_factory=dict)


class SlackApiReader:
    """Reads a workspace through a WebClient; one instance per run (it caches users and channels)."""

    def __init__(
        self,
        client: WebClient,
        settings: SlackSyncSettings | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        # The budget of the channel read in progress (read_days), spent by every request it makes.
        self._budget: ReadBudget | None = None
        self.settings = settings or SlackSyncSettings()
        self._log = log or (lambda _msg: None)
        self._identity: tuple[str, str | None] | None = None
        self._users: dict[str, str] | None = None
        self._user_lookups: dict[str, str | None] = {}
        self._channels: dict[str, SlackChannel] = {}
        self._channels_with_members: dict[str, SlackChannel] = {}

    @property
    def stats(self) -> ApiStats:
        """Calls and retries so far (a client not built by :func:`build_web_client` counts nothing)."""
        stats = getattr(self.client, "stats", None)
        return stats if isinstance(stats, ApiStats) else ApiStats()

    # --- Web API plumbing -------------------------------------------------------------------
    def _call(self, method: str, where: str | None = None, **params: Any) -> dict[str, Any]:
        """Call a Web API method; ``where`` names the channel in error messages."""
        budget = self._budget
        if budget is not None:
            budget.spend()
        retries_before = self.stats.total_retries
        try:
            response = getattr(self.client, method.replace(".", "_"))(**params)
        except SlackApiError as exc:
            raise SlackAccessError(describe_slack_error(exc, method, self._describe(where))) from None
        except (TimeoutError, URLError) as exc:
            # A connect timeout arrives (after the connection retries) as a URLError around a TimeoutError.
            if isinstance(exc, URLError) and not isinstance(exc.reason, TimeoutError):
                raise
            timeout = getattr(self.client, "timeout", "?")
            raise GuardTripped(
                f"{method} for {self._describe(where) or 'the workspace'} got no complete answer within {timeout} s "
                "(RAG_API_TIMEOUT_SECONDS); it stays unsynced and is read again next time",
                "timeout",
            ) from None
        finally:
            # Retries are requests too: they spend the same rate-limit allowance the budget protects.
            retried = self.stats.total_retries - retries_before
            if budget is not None and retried:
                budget.requests += retried
        return dict(response.data)

    def _describe(self, channel_id: str | None) -> str | None:
        if channel_id is None:
            return None
        name = self._channel_name(channel_id)
        return f"#{name} ({channel_id})" if name else channel_id

    def _pages(self, method: str, key: str, where: str | None = None, **params: Any) -> Iterator[Any]:
        """The items under ``key`` across a cursor-paged method's pages (records, or ids for members); the one
        place that follows cursors, so one guard per call stops a server whose cursor never ends."""
        guard = PageGuard(method, self._describe(where) or "the workspace", page_cap=self.settings.page_cap)
        cursor: str | None = None
        while True:
            limit = self.settings.page_size if method in _MESSAGE_METHODS else LISTING_PAGE_SIZE
            data = self._call(method, where, **params, limit=limit, cursor=cursor)
            items = data.get(key) or []
            yield from items
            cursor = (data.get("response_metadata") or {}).get("next_cursor") or None
            try:
                guard.page(len(items), cursor)
            except GuardTripped as exc:
                if cursor and cursor[:60] not in str(exc):
                    raise GuardTripped(f"{exc} (last cursor {cursor[:60]!r})", exc.guard) from None
                raise
            if not cursor:
                return

    def pages(self, method: str, key: str, where: str | None = None, **params: Any) -> Iterator[Any]:
        """:meth:`_pages` for the directory sync, which lists users and members with the same guards."""
        return self._pages(method, key, where, **params)

    # --- workspace --------------------------------------------------------------------------
    @property
    def team_id(self) -> str:
        return self._whoami()[0]

    @property
    def domain(self) -> str | None:
        return self._whoami()[1]

    def _whoami(self) -> tuple[str, str | None]:
        if self._identity is None:
            data = self._call("auth.test")
            url = data.get("url") or ""
            self._identity = (data["team_id"], re.sub(r"^https?://|/+$", "", url) or None)
        return self._identity

    def _user_names(self) -> dict[str, str]:
        if self._users is None:
            # A record without an id names nobody; it must not end the read of every channel (the directory
            # sync reports it).
            self._users = {
                u["id"]: user_display_name(u)
                for u in self._pages("users.list", "members")
                if isinstance(u, dict) and isinstance(u.get("id"), str) and u["id"]
            }
        return self._users

    def user_name(self, user_id: str) -> str | None:
        """Workspace users from users.list; others (Slack Connect) looked up once with users.info."""
        names = self._user_names()
        if user_id in names:
            return names[user_id]
        if user_id not in self._user_lookups:
            try:
                user = self._call("users.info", user=user_id).get("user") or {}
                self._user_lookups[user_id] = user_display_name(user) if user.get("id") else None
            except SlackAccessError:
                self._user_lookups[user_id] = None
        return self._user_lookups[user_id]

    def discover_channels(self) -> list[SlackChannel]:
        """Channels the connector should and can read (see :meth:`discover` for the ones left out)."""
        return self.discover().channels

    def discover(self) -> ChannelDiscovery:
        """Channels the connector should read: public ones the bot is in, private ones it was invited to, minus
        filters. A listing whose id cannot be a partition key is a problem; a wanted public channel the bot is
        not in is reported (history would answer ``not_in_channel``)."""
        types = "public_channel,private_channel" if self.settings.include_private else "public_channel"
        listed = self._pages(
            "conversations.list", "channels", types=types, exclude_archived=not self.settings.include_archived
        )
        out = ChannelDiscovery()
        for number, raw in enumerate(listed, start=1):
            raw_id = raw.get("id")
            if not is_valid_container_id(raw_id):
                name = display_name(raw.get("name"), "?", MAX_CHANNEL_NAME_LENGTH)
                try:
                    check_container_id(raw_id, f"Slack channel id of #{name}")
                except InvalidIdentifier as exc:
                    out.problems.append(RecordProblem(f"slack conversations.list entry {number}", str(exc)))
                continue
            try:
                channel = self._remember(raw)
            except SlackAccessError as exc:
                # A listing that does not say whether the channel is private is kept as a private one (never
                # public): discovery still gives it a partition, and its read, which asks conversations.info
                # again, fails that channel alone (named in rag/failed_containers) until Slack says.
                out.problems.append(RecordProblem(f"slack conversations.list entry {number}", str(exc)))
                channel = SlackChannel(
                    id=raw_id,
                    name=display_name(raw.get("name"), raw_id, MAX_CHANNEL_NAME_LENGTH),
                    is_private=True,
                    is_archived=bool(raw.get("is_archived")),
                )
            if not self.settings.wants(channel):
                continue
            # conversations.list only returns private channels the bot is in, but every public one; an absent
            # is_member (older payloads) counts as a member so the read itself reports what is wrong.
            if raw.get("is_member") is False:
                out.not_member.append(channel)
            else:
                out.channels.append(channel)
        return out

    def _remember(self, raw: Mapping[str, Any]) -> SlackChannel:
        channel_id = check_container_id(raw.get("id"), "Slack channel id")
        channel = SlackChannel(
            id=channel_id,
            name=display_name(raw.get("name"), channel_id, MAX_CHANNEL_NAME_LENGTH),
            is_private=self._is_private(raw, channel_id),
            is_archived=bool(raw.get("is_archived")),
        )
        self._channels[channel.id] = channel
        return channel

    def _is_private(self, raw: Mapping[str, Any], channel_id: str) -> bool:
        """The channel record's ``is_private``; :class:`SlackAccessError` when it is missing or not a boolean.
        A record that does not say must never make a channel public (its threads readable by the whole
        workspace): the channel fails alone and is read again next time."""
        value = raw.get("is_private")
        if isinstance(value, bool):
            return value
        what = "no is_private field" if "is_private" not in raw else f"is_private {shown(value)}, not a boolean"
        name = display_name(raw.get("name"), "", MAX_CHANNEL_NAME_LENGTH)
        where = f"#{name} ({channel_id})" if name else channel_id
        raise SlackAccessError(
            f"Slack answered channel {where} with {what}: whether it is private is unknown, so none of its threads "
            "is written (it is read again next time)"
        )

    def channel(self, channel_id: str) -> SlackChannel:
        """A channel with the members its ACL needs (private: all; shared: the external ones),
        read once per reader."""
        if channel_id in self._channels_with_members:
            return self._channels_with_members[channel_id]
        raw = self._call("conversations.info", channel_id, channel=channel_id).get("channel") or {}
        base = self._remember(raw)
        if not base.is_private and not raw.get("is_ext_shared"):
            self._channels_with_members[channel_id] = base
            return base
        members = tuple(self._pages("conversations.members", "members", channel_id, channel=channel_id))
        workspace = self._user_names()
        external = tuple(m for m in members if m not in workspace) if raw.get("is_ext_shared") else ()
        channel = SlackChannel(base.id, base.name, base.is_private, base.is_archived, members, external)
        self._channels[channel.id] = self._channels_with_members[channel.id] = channel
        return channel

    @cached_property
    def _builder(self) -> ThreadDocumentBuilder:
        return ThreadDocumentBuilder(self.team_id, self.domain, self.user_name, self._channel_name)

    def _channel_name(self, channel_id: str) -> str | None:
        channel = self._channels.get(channel_id)
        return channel.name if channel else None

    # --- threads ------------------------------------------------------------------------------
    def read_days(self, channel_id: str, days: Iterable[str]) -> ChannelRead:
        """Threads of a channel with activity on any of ``days`` (UTC, YYYY-MM-DD)."""
        wanted = sorted(set(days))
        if not wanted:
            return ChannelRead()
        per_day = self.settings
        self._budget = ReadBudget.per_day(
            self._describe(channel_id) or channel_id, len(wanted), per_day.requests_per_day, per_day.seconds_per_day
        )
        try:
            return self._read_days(channel_id, wanted)
        finally:
            self._budget = None

    def _read_days(self, channel_id: str, wanted: list[str]) -> ChannelRead:
        out = ChannelRead()
        channel = self.channel(channel_id)
        if self._budget is not None:  # the channel's name is known now, for the budget's message
            self._budget.where = self._describe(channel_id) or channel_id
        start = day_start(wanted[0])
        end = day_start(wanted[-1]) + DAY
        window_start = start - self.settings.lookback_days * DAY
        wanted_set = set(wanted)
        builder = self._builder
        listed = self._history(channel.id, window_start, end)
        for thread_ts, messages in self._threads_to_fetch(channel.id, listed, wanted_set, start):
            out.threads_fetched += 1
            by_ts = group_threads(messages).get(thread_ts)
            if not by_ts:
                continue
            try:
                doc = builder.build(channel, thread_ts, by_ts)
            except (KeyError, TypeError, ValueError) as exc:
                out.problems.append(
                    RecordProblem(f"slack #{channel.name} thread {thread_ts}", f"{type(exc).__name__}: {exc}")
                )
                continue
            if doc is None:
                continue
            day = _partition_day(doc, by_ts, wanted_set)
            if day is not None:
                out.documents.append(doc)
                out.partition_day[doc.id] = day
        self._log(
            f"#{channel.name}: {len(out.documents)} threads with activity on {len(wanted)} day(s) "
            f"({len(listed)} messages listed, {out.threads_fetched} threads read)"
        )
        return out

    def _history(self, channel_id: str, oldest: float, latest: float) -> list[dict[str, Any]]:
        messages = self._pages(
            "conversations.history",
            "messages",
            channel_id,
            channel=channel_id,
            oldest=_ts(oldest),
            latest=_ts(latest),
            inclusive=True,
        )
        return [m for m in messages if oldest <= float(m["ts"]) < latest]

    def _threads_to_fetch(
        self, channel_id: str, listed: Sequence[dict[str, Any]], days: set[str], start: float
    ) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        roots: dict[str, dict[str, Any]] = {}
        broadcast_threads: set[str] = set()
        for msg in listed:
            thread_ts = msg.get("thread_ts") or msg["ts"]
            if thread_ts == msg["ts"]:
                roots[msg["ts"]] = msg
            else:
                # A broadcast reply reveals its thread even when the root is older than the lookback.
                broadcast_threads.add(thread_ts)
        for thread_ts in sorted(set(roots) | broadcast_threads, key=float):
            root = roots.get(thread_ts)
            has_replies = root is None or int(root.get("reply_count") or 0) > 0
            root_active = root is not None and day_of(max(float(thread_ts), edited_ts(root))) in days
            new_replies = root is not None and float(root.get("latest_reply") or 0) >= start
            if has_replies and (root is None or root_active or new_replies or self.settings.rescan_thread_replies):
                yield thread_ts, list(self.replies(channel_id, thread_ts))
            elif root_active and root is not None:
                yield thread_ts, [root]

    def replies(self, channel_id: str, thread_ts: str) -> Iterator[dict[str, Any]]:
        """A whole thread, root first (pages may repeat the root; callers dedupe by ts)."""
        return self._pages("conversations.replies", "messages", channel_id, channel=channel_id, ts=thread_ts)

    def thread_roots(self, channel_id: str, oldest: float | None = None) -> list[ThreadRoot]:
        """Every root history lists now (tombstoned roots included), for reconciliation."""
        params: dict[str, Any] = {"channel": channel_id}
        if oldest is not None:
            params["oldest"] = _ts(oldest)
        roots = []
        for msg in self._pages("conversations.history", "messages", channel_id, **params):
            if (msg.get("thread_ts") or msg["ts"]) == msg["ts"]:
                roots.append(
                    ThreadRoot(msg["ts"], int(msg.get("reply_count") or 0), msg.get("subtype") == "tombstone", msg)
                )
        return roots

    def thread_document(
        self, channel_id: str, thread_ts: str, messages: Iterable[Mapping[str, Any]] | None = None
    ) -> Document | None:
        """The current document of one thread (None when nothing readable is left); ``messages``
        spares the replies call for a root history showed without replies."""
        channel = self.channel(channel_id)
        listed = self.replies(channel_id, thread_ts) if messages is None else messages
        by_ts = group_threads(listed).get(thread_ts)
        return self._builder.build(channel, thread_ts, by_ts) if by_ts else None


def _partition_day(doc: Document, by_ts: Mapping[str, Mapping[str, Any]], days: set[str]) -> str | None:
    """The thread's partition: the day of its latest activity, or — when that day is outside the
    run — the latest day of the run it was active on, so a thread is never dropped for having
    moved on. None when the thread had no activity on the run's days."""
    if doc.day in days:
        return doc.day
    active = {day_of(t) for t in activity_times(by_ts)} & days
    return max(active) if active else None


def _ts(seconds: float) -> str:
    return f"{seconds:.6f}"
