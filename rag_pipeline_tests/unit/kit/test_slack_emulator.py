"""The Slack Web API emulator, driven by the real ``slack_sdk.WebClient``: paging, threads, edits and deletions,
errors, fault injection with the SDK's retry handlers, export round trips and request recording."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from http.client import RemoteDisconnected
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.error import URLError

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler
from slack_sdk.http_retry import builtin_handlers as retry_builtins
from slack_sdk.http_retry.builtin_handlers import ServerErrorRetryHandler
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator

from rag_pipeline.connectors.slack.settings import BUNDLED_SLACK_EXPORT
from rag_pipeline_tests.kit import slack_fixtures as fx
from rag_pipeline_tests.kit.emulators.slack_api import RecordedRequest, SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import TOMBSTONE_TEXT, SlackWorkspace

TOKEN = "xoxb-test-token"
NO_WAIT = FixedValueRetryIntervalCalculator(0.0)


@pytest.fixture
def workspace() -> SlackWorkspace:
    return fx.crafted_workspace()


@pytest.fixture
def emulator(workspace: SlackWorkspace) -> Iterator[SlackEmulator]:
    with SlackEmulator(workspace) as emu:
        yield emu


def make_client(emulator: SlackEmulator, *handlers: Any, token: str = TOKEN) -> WebClient:
    """A WebClient on the emulator with exactly these retry handlers (none: no retries at all)."""
    return WebClient(token=token, base_url=emulator.base_url, retry_handlers=list(handlers), timeout=5)


def history_pages(client: WebClient, channel: str, **kwargs: Any) -> list[list[dict[str, Any]]]:
    return [page["messages"] for page in client.conversations_history(channel=channel, **kwargs)]


def by_ts(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["ts"]: m for m in messages}


def api_error(excinfo: pytest.ExceptionInfo[SlackApiError]) -> str:
    return excinfo.value.response["error"]


# -- fixtures ---------------------------------------------------------------------------------------------------------


def test_crafted_workspace_is_as_documented(workspace: SlackWorkspace) -> None:
    general = workspace.channels[fx.GENERAL_CHANNEL]
    replies = [m for m in general.messages.values() if m.get("thread_ts") not in (None, m["ts"])]
    assert len(general.messages) - len(replies) == fx.GENERAL_ROOT_COUNT >= 20
    assert len(replies) == fx.GENERAL_REPLY_COUNT
    march = (datetime(2024, 3, 1, tzinfo=UTC).timestamp(), datetime(2024, 4, 1, tzinfo=UTC).timestamp())
    for channel in workspace.channels.values():
        for ts, message in channel.messages.items():
            assert ts == message["ts"] == f"{float(ts):.6f}"
            assert march[0] <= float(ts) < march[1]
    assert len(workspace.users) >= 5
    assert {u["id"] for u in workspace.users} >= {fx.ALICE, fx.BOB, fx.CAROL, fx.DAVE, fx.BOT_USER}
    assert next(u for u in workspace.users if u["id"] == fx.BOT_USER)["is_bot"] is True
    assert workspace.external_users[fx.EXTERNAL_USER]["team_id"] == fx.PARTNER_TEAM
    assert general.messages[fx.TOMBSTONE_ROOT_TS]["subtype"] == "tombstone"
    assert general.messages[fx.EDITED_ROOT_TS]["edited"]["ts"] == fx.EDIT_TS
    assert general.messages[fx.BROADCAST_TS]["thread_ts"] == fx.BROADCAST_ROOT_TS
    assert "user" not in general.messages[fx.BOT_MESSAGE_TS]


def test_synthetic_workspace_spreads_threads_deterministically() -> None:
    bundled_count = sum(len(c.messages) for c in fx.bundled_workspace().channels.values())
    ws = fx.synthetic_workspace(channels=3, days=4, start="2024-01-01", seed=7)
    assert (ws.team_id, ws.domain) == ("T0SYNTH", "synth.slack.com")
    assert list(ws.channels) == [fx.synthetic_channel_id(i) for i in range(3)]
    assert sum(len(c.messages) for c in ws.channels.values()) == bundled_count
    start = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    for channel in ws.channels.values():
        per_day = [0] * 4
        for message in channel.messages.values():
            day = int((float(message["ts"]) - start) // 86400)
            assert 0 <= day < 4
            thread_ts = message.get("thread_ts")
            if thread_ts and thread_ts != message["ts"]:
                assert thread_ts in channel.messages  # the root is in the same channel
                assert Decimal(thread_ts) < Decimal(message["ts"])
            else:
                per_day[day] += 1
        assert min(per_day) > 0.8 * max(per_day)  # a similar share of threads per channel-day
    again = fx.synthetic_workspace(channels=3, days=4, start="2024-01-01", seed=7)
    assert {c: ch.messages for c, ch in again.channels.items()} == {c: ch.messages for c, ch in ws.channels.items()}
    other = fx.synthetic_workspace(channels=3, days=4, start="2024-01-01", seed=8)
    assert other.channels[fx.synthetic_channel_id(0)].messages != ws.channels[fx.synthetic_channel_id(0)].messages


# -- basics and listing -----------------------------------------------------------------------------------------------


def test_auth_test(emulator: SlackEmulator) -> None:
    response = make_client(emulator).auth_test()
    assert response["url"] == "https://crafted.slack.com/"
    assert (response["team_id"], response["user_id"]) == (fx.CRAFTED_TEAM, "U0BOT00001")
    assert response["bot_id"]


def test_private_channels_listed_only_when_member(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    public = [c["id"] for page in client.conversations_list() for c in page["channels"]]
    assert public == [fx.GENERAL_CHANNEL, fx.SHARED_CHANNEL, fx.NOJOIN_CHANNEL, fx.ARCHIVED_CHANNEL]
    both = {
        c["id"]: c
        for page in client.conversations_list(types="public_channel,private_channel", exclude_archived=True, limit=2)
        for c in page["channels"]
    }
    assert set(both) == {fx.GENERAL_CHANNEL, fx.SHARED_CHANNEL, fx.PRIVATE_CHANNEL, fx.NOJOIN_CHANNEL}
    assert fx.HIDDEN_CHANNEL not in both
    assert both[fx.PRIVATE_CHANNEL]["is_private"] is True
    assert both[fx.NOJOIN_CHANNEL]["is_member"] is False
    shared = both[fx.SHARED_CHANNEL]
    assert shared["is_ext_shared"] and shared["is_shared"]
    assert shared["shared_team_ids"] == [fx.CRAFTED_TEAM, fx.PARTNER_TEAM]
    assert shared["context_team_id"] == fx.CRAFTED_TEAM
    assert both[fx.GENERAL_CHANNEL]["num_members"] == 5
    # limit=2: two pages for the 4 channels (the archived one excluded), the second with a cursor.
    pages = emulator.calls("conversations.list")[1:]
    assert [r.params.get("cursor") is not None for r in pages] == [False, True]
    with pytest.raises(SlackApiError) as excinfo:
        client.conversations_info(channel=fx.HIDDEN_CHANNEL)
    assert api_error(excinfo) == "channel_not_found"
    assert client.conversations_info(channel=fx.ARCHIVED_CHANNEL)["channel"]["is_archived"] is True


def test_members_users_and_external_users(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    pages = [page["members"] for page in client.conversations_members(channel=fx.SHARED_CHANNEL, limit=2)]
    assert pages == [[fx.ALICE, fx.BOB], [fx.EXTERNAL_USER]]
    users = [u for page in client.users_list(limit=4) for u in page["members"]]
    assert [u["id"] for u in users] == [u["id"] for u in emulator.workspace.users]
    assert fx.EXTERNAL_USER not in {u["id"] for u in users}
    assert all(u["team_id"] == fx.CRAFTED_TEAM and "profile" in u for u in users)
    erin = client.users_info(user=fx.EXTERNAL_USER)["user"]
    assert (erin["name"], erin["team_id"]) == ("erin", fx.PARTNER_TEAM)
    with pytest.raises(SlackApiError) as excinfo:
        client.users_info(user="U0NOBODY01")
    assert api_error(excinfo) == "user_not_found"


# -- history ----------------------------------------------------------------------------------------------------------


def test_history_pages_newest_first_with_limit(emulator: SlackEmulator) -> None:
    pages = history_pages(make_client(emulator), fx.GENERAL_CHANNEL, limit=5)
    assert [len(p) for p in pages] == [5] * 6 + [1]
    flat = [m["ts"] for p in pages for m in p]
    assert len(flat) == len(set(flat)) == fx.GENERAL_HISTORY_COUNT
    assert flat == sorted(flat, key=Decimal, reverse=True)
    requests = emulator.calls("conversations.history")
    assert "cursor" not in requests[0].params
    assert all(r.params["limit"] == "5" and r.params["cursor"] for r in requests[1:])


def test_history_limit_is_capped_by_max_limit(workspace: SlackWorkspace) -> None:
    with SlackEmulator(workspace, max_limit=15) as emu:
        client = make_client(emu)
        first = client.conversations_history(channel=fx.GENERAL_CHANNEL, limit=100)
        assert len(first["messages"]) == 15
        assert first["has_more"] is True and first["response_metadata"]["next_cursor"]
        assert [len(p) for p in history_pages(client, fx.GENERAL_CHANNEL, limit=100)] == [15, 15, 1]
        assert len(client.conversations_history(channel=fx.GENERAL_CHANNEL)["messages"]) == 15  # default 100 -> 15
    with SlackEmulator(workspace, default_limit=7) as emu:
        assert len(make_client(emu).conversations_history(channel=fx.GENERAL_CHANNEL)["messages"]) == 7


def test_history_lists_roots_and_broadcasts_with_live_thread_summaries(emulator: SlackEmulator) -> None:
    messages = by_ts(history_pages(make_client(emulator), fx.GENERAL_CHANNEL)[0])
    assert fx.BROADCAST_TS in messages and messages[fx.BROADCAST_TS]["subtype"] == "thread_broadcast"
    assert messages[fx.BROADCAST_TS]["root"]["ts"] == fx.BROADCAST_ROOT_TS
    assert fx.LATE_REPLY_TS not in messages and fx.SAME_DAY_REPLY_TSS[0] not in messages
    root = messages[fx.LATE_REPLY_ROOT_TS]
    assert root["thread_ts"] == fx.LATE_REPLY_ROOT_TS
    assert root["reply_count"] == 3 and root["latest_reply"] == fx.LATE_REPLY_TS
    assert root["reply_users"] == [fx.BOB, fx.CAROL, fx.DAVE] and root["reply_users_count"] == 3
    assert messages[fx.BROADCAST_ROOT_TS]["reply_count"] == 2  # the broadcast counts as a reply
    tombstone = messages[fx.TOMBSTONE_ROOT_TS]
    assert (tombstone["subtype"], tombstone["text"], tombstone["user"]) == ("tombstone", TOMBSTONE_TEXT, "USLACKBOT")
    assert tombstone["hidden"] is True and tombstone["reply_count"] == 2
    assert messages[fx.BOT_MESSAGE_TS]["subtype"] == "bot_message" and "user" not in messages[fx.BOT_MESSAGE_TS]
    assert messages[fx.APP_BOT_MESSAGE_TS]["bot_profile"]["id"] == messages[fx.APP_BOT_MESSAGE_TS]["bot_id"]
    assert messages[fx.CHANNEL_JOIN_TS]["subtype"] == "channel_join"
    assert messages[fx.EXTERNAL_MESSAGE_TS]["user_team"] == fx.PARTNER_TEAM
    assert messages[fx.MENTION_TS]["text"] == fx.MENTION_TEXT
    assert "reply_count" not in messages[fx.EDITED_ROOT_TS]


def test_history_time_window(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    window = {"oldest": fx.EDITED_ROOT_TS, "latest": fx.EXTERNAL_MESSAGE_TS}
    exclusive = [m["ts"] for m in client.conversations_history(channel=fx.GENERAL_CHANNEL, **window)["messages"]]
    inclusive = [
        m["ts"] for m in client.conversations_history(channel=fx.GENERAL_CHANNEL, inclusive=True, **window)["messages"]
    ]
    assert fx.EDITED_ROOT_TS not in exclusive and fx.EXTERNAL_MESSAGE_TS not in exclusive
    assert inclusive == [fx.EXTERNAL_MESSAGE_TS, *exclusive, fx.EDITED_ROOT_TS]
    assert all(Decimal(fx.EDITED_ROOT_TS) < Decimal(ts) < Decimal(fx.EXTERNAL_MESSAGE_TS) for ts in exclusive)
    assert emulator.calls("conversations.history")[1].params["inclusive"] == "1"
    # A watermark after the late thread's root: the root (and its late reply) are not in history.
    after = [
        m["ts"] for m in client.conversations_history(channel=fx.GENERAL_CHANNEL, oldest=fx.march_ts(10, 0))["messages"]
    ]
    assert fx.LATE_REPLY_ROOT_TS not in after and fx.LATE_REPLY_TS not in after


def test_bundled_export_served_with_live_reply_fields() -> None:
    with SlackEmulator(fx.bundled_workspace()) as emu:
        client = make_client(emu)
        assert [c["id"] for c in client.conversations_list()["channels"]] == [fx.BUNDLED_CHANNEL]
        page = client.conversations_history(channel=fx.BUNDLED_CHANNEL, limit=200)["messages"]
        roots = [m for m in page if "reply_count" in m]
        assert roots and all("replies" not in m for m in page)
        assert all("_line" in m for m in page)  # stored extras are kept
        thread = client.conversations_replies(channel=fx.BUNDLED_CHANNEL, ts=roots[0]["ts"], limit=1000)["messages"]
        assert len(thread) == roots[0]["reply_count"] + 1
        assert thread[-1]["ts"] == roots[0]["latest_reply"]


# -- threads, edits, deletions ----------------------------------------------------------------------------------------


def test_replies_root_only_on_first_page(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    pages = [
        [m["ts"] for m in page["messages"]]
        for page in client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts=fx.LATE_REPLY_ROOT_TS, limit=2)
    ]
    assert pages == [[fx.LATE_REPLY_ROOT_TS, fx.SAME_DAY_REPLY_TSS[0]], [fx.SAME_DAY_REPLY_TSS[1], fx.LATE_REPLY_TS]]
    since = client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts=fx.LATE_REPLY_ROOT_TS, oldest=fx.march_ts(2, 0))
    assert [m["ts"] for m in since["messages"]] == [fx.LATE_REPLY_ROOT_TS, fx.LATE_REPLY_TS]
    assert since["messages"][0]["reply_count"] == 3  # the summary counts every reply, not the window
    broadcast_thread = client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts=fx.BROADCAST_ROOT_TS)["messages"]
    assert [m["ts"] for m in broadcast_thread] == [fx.BROADCAST_ROOT_TS, fx.BROADCAST_PLAIN_REPLY_TS, fx.BROADCAST_TS]
    tomb = client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts=fx.TOMBSTONE_ROOT_TS)["messages"]
    assert [m["ts"] for m in tomb] == [fx.TOMBSTONE_ROOT_TS, *fx.TOMBSTONE_REPLY_TSS]
    single = client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts=fx.EDITED_ROOT_TS)
    assert [m["ts"] for m in single["messages"]] == [fx.EDITED_ROOT_TS] and single["has_more"] is False
    with pytest.raises(SlackApiError) as excinfo:
        client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts="1709900000.000001")
    assert api_error(excinfo) == "thread_not_found"


def test_reply_summary_follows_posts_and_deletions(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    ws = emulator.workspace

    def root(ts: str) -> dict[str, Any]:
        return client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts=ts, limit=1)["messages"][0]

    new_reply = fx.march_ts(12, 18)
    ws.post(fx.GENERAL_CHANNEL, {"ts": new_reply, "thread_ts": fx.EDITED_ROOT_TS, "user": fx.DAVE, "text": "ok"})
    summary = root(fx.EDITED_ROOT_TS)
    assert (summary["reply_count"], summary["latest_reply"], summary["reply_users"]) == (1, new_reply, [fx.DAVE])
    ws.delete(fx.GENERAL_CHANNEL, new_reply)
    assert "reply_count" not in root(fx.EDITED_ROOT_TS)
    ws.delete(fx.GENERAL_CHANNEL, fx.LATE_REPLY_TS)
    summary = root(fx.LATE_REPLY_ROOT_TS)
    assert (summary["reply_count"], summary["latest_reply"]) == (2, fx.SAME_DAY_REPLY_TSS[1])


def test_deleting_root_with_replies_leaves_tombstone(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    ws = emulator.workspace
    ws.delete(fx.GENERAL_CHANNEL, fx.LATE_REPLY_ROOT_TS)
    ws.delete(fx.GENERAL_CHANNEL, fx.MORNING_ROOT_TSS[5])  # no replies: just gone
    history = by_ts([m for p in history_pages(client, fx.GENERAL_CHANNEL) for m in p])
    assert fx.MORNING_ROOT_TSS[5] not in history
    tombstone = history[fx.LATE_REPLY_ROOT_TS]
    assert tombstone["subtype"] == "tombstone" and tombstone["text"] == TOMBSTONE_TEXT
    assert tombstone["hidden"] is True and tombstone["user"] == "USLACKBOT"
    assert tombstone["reply_count"] == 3 and tombstone["latest_reply"] == fx.LATE_REPLY_TS
    thread = client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts=fx.LATE_REPLY_ROOT_TS)["messages"]
    assert [m["ts"] for m in thread] == [fx.LATE_REPLY_ROOT_TS, *fx.SAME_DAY_REPLY_TSS, fx.LATE_REPLY_TS]
    # Once the last reply of a tombstoned thread is gone, the tombstone goes too.
    for ts in fx.TOMBSTONE_REPLY_TSS:
        ws.delete(fx.GENERAL_CHANNEL, ts)
    assert fx.TOMBSTONE_ROOT_TS not in ws.channels[fx.GENERAL_CHANNEL].messages


def test_edit_keeps_ts(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    edited = by_ts(client.conversations_history(channel=fx.GENERAL_CHANNEL)["messages"])[fx.EDITED_ROOT_TS]
    assert edited["text"] == fx.EDITED_ROOT_TEXT and edited["edited"] == {"user": fx.BOB, "ts": fx.EDIT_TS}
    reply = client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts=fx.EDITED_REPLY_ROOT_TS)["messages"][1]
    assert (reply["ts"], reply["text"], reply["edited"]["ts"]) == (
        fx.EDITED_REPLY_TS,
        fx.EDITED_REPLY_TEXT,
        fx.REPLY_EDIT_TS,
    )
    emulator.workspace.edit(fx.GENERAL_CHANNEL, fx.MENTION_TS, "new words", fx.march_ts(20, 9), user=fx.ALICE)
    history = client.conversations_history(channel=fx.GENERAL_CHANNEL)["messages"]
    again = by_ts(history)[fx.MENTION_TS]
    assert again["text"] == "new words" and "blocks" not in again
    assert again["edited"] == {"user": fx.ALICE, "ts": fx.march_ts(20, 9)}
    assert len(history) == fx.GENERAL_HISTORY_COUNT


def test_chat_post_message(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    with pytest.raises(SlackApiError) as excinfo:
        client.chat_postMessage(channel=fx.GENERAL_CHANNEL, text="hello")
    assert api_error(excinfo) == "missing_scope" and excinfo.value.response["needed"] == "chat:write"
    emulator.workspace.scopes.add("chat:write")
    posted = client.chat_postMessage(channel=fx.GENERAL_CHANNEL, text="hello")
    second = client.chat_postMessage(channel=fx.GENERAL_CHANNEL, text="again", thread_ts=posted["ts"])
    assert posted["channel"] == fx.GENERAL_CHANNEL and posted["message"]["text"] == "hello"
    assert Decimal(second["ts"]) > Decimal(posted["ts"])
    newest = client.conversations_history(channel=fx.GENERAL_CHANNEL, limit=1)["messages"][0]
    assert newest["ts"] == posted["ts"] and newest["reply_count"] == 1
    assert newest["user"] == "U0BOT00001"
    assert emulator.calls("chat.postMessage")[-1].params == {
        "channel": fx.GENERAL_CHANNEL,
        "text": "again",
        "thread_ts": posted["ts"],
    }


# -- errors ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.conversations_history(channel=fx.NOJOIN_CHANNEL), "not_in_channel"),
        (lambda c: c.conversations_replies(channel=fx.NOJOIN_CHANNEL, ts=fx.NOJOIN_MESSAGE_TS), "not_in_channel"),
        (lambda c: c.conversations_history(channel=fx.HIDDEN_CHANNEL), "channel_not_found"),
        (lambda c: c.conversations_members(channel=fx.HIDDEN_CHANNEL), "channel_not_found"),
        (lambda c: c.conversations_history(channel="C0NOWHERE1"), "channel_not_found"),
        (lambda c: c.api_call("conversations.nonsense"), "unknown_method"),
    ],
)
def test_api_errors(emulator: SlackEmulator, call: Any, error: str) -> None:
    with pytest.raises(SlackApiError) as excinfo:
        call(make_client(emulator))
    assert excinfo.value.response.status_code == 200
    assert api_error(excinfo) == error


def test_not_joined_channel_is_listed_and_has_members(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    assert client.conversations_members(channel=fx.NOJOIN_CHANNEL)["members"] == [fx.BOB, fx.DAVE]
    assert client.conversations_info(channel=fx.NOJOIN_CHANNEL)["channel"]["is_member"] is False


def test_missing_scope(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    emulator.workspace.scopes.discard("groups:history")
    with pytest.raises(SlackApiError) as excinfo:
        client.conversations_history(channel=fx.PRIVATE_CHANNEL)
    assert excinfo.value.response.data == {
        "ok": False,
        "error": "missing_scope",
        "needed": "groups:history",
        "provided": "channels:history,channels:read,groups:read,users:read",
    }
    assert client.conversations_history(channel=fx.GENERAL_CHANNEL)["ok"]  # public history needs channels:history
    emulator.workspace.scopes.discard("groups:read")
    with pytest.raises(SlackApiError) as excinfo:
        client.conversations_list(types="public_channel,private_channel")
    assert excinfo.value.response["needed"] == "groups:read"
    emulator.workspace.scopes.discard("users:read")
    with pytest.raises(SlackApiError) as excinfo:
        client.users_list()
    assert excinfo.value.response["needed"] == "users:read"


def test_invalid_auth(emulator: SlackEmulator) -> None:
    with pytest.raises(SlackApiError) as excinfo:
        make_client(emulator, token="xoxb-wrong").conversations_list()
    assert api_error(excinfo) == "invalid_auth"
    with pytest.raises(SlackApiError) as excinfo:
        WebClient(base_url=emulator.base_url, retry_handlers=[]).api_call("auth.test")
    assert api_error(excinfo) == "invalid_auth"


# -- faults and retry handlers -----------------------------------------------------------------------------------------


@pytest.fixture
def no_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """RateLimitErrorRetryHandler sleeps Retry-After + random(): take the random part away."""
    monkeypatch.setattr(retry_builtins, "random", SimpleNamespace(random=lambda: 0.0))


def statuses(emulator: SlackEmulator, method: str) -> list[int]:
    return [r.status for r in emulator.requests if r.method == method]


def test_rate_limit_retry_converges(emulator: SlackEmulator, no_jitter: None) -> None:
    emulator.inject("429", method="conversations.history", count=2, retry_after=0)
    client = make_client(emulator, RateLimitErrorRetryHandler(max_retry_count=3))
    client.conversations_list()  # not the targeted method: unaffected
    assert len(client.conversations_history(channel=fx.GENERAL_CHANNEL, limit=3)["messages"]) == 3
    assert statuses(emulator, "conversations.history") == [429, 429, 200]
    assert len(emulator.calls("conversations.history")) == 1
    faulted = emulator.requests[1]
    assert faulted.params == {"channel": fx.GENERAL_CHANNEL, "limit": "3"}


def test_rate_limit_without_handler_raises_with_retry_after(emulator: SlackEmulator, no_jitter: None) -> None:
    emulator.inject("429", retry_after=0)
    with pytest.raises(SlackApiError) as excinfo:
        make_client(emulator).conversations_list()
    response = excinfo.value.response
    assert response.status_code == 429 and response.data == {"ok": False, "error": "ratelimited"}
    assert response.headers["Retry-After"] in ("0", ["0"])
    emulator.inject("429", count=3)
    with pytest.raises(SlackApiError):  # 1 try + 1 retry (the default max_retry_count)
        make_client(emulator, RateLimitErrorRetryHandler()).conversations_list()
    assert statuses(emulator, "conversations.list") == [429, 429, 429]  # the first 429, then 2 of the 3 queued
    emulator.clear_faults()  # drops the third
    assert make_client(emulator).conversations_list()["ok"]
    assert statuses(emulator, "conversations.list") == [429, 429, 429, 200]


def test_server_errors_retried(emulator: SlackEmulator) -> None:
    emulator.inject("500", method="users.list")
    emulator.inject("503", method="users.list")
    client = make_client(emulator, ServerErrorRetryHandler(max_retry_count=2, interval_calculator=NO_WAIT))
    assert client.users_list()["members"]
    assert statuses(emulator, "users.list") == [500, 503, 200]
    emulator.inject("500")
    with pytest.raises(SlackApiError) as excinfo:
        make_client(emulator).users_list()
    assert excinfo.value.response.status_code == 500
    assert excinfo.value.response.data == {"ok": False, "error": "internal_error"}


def test_dropped_connection_retried(emulator: SlackEmulator) -> None:
    emulator.inject("drop", method="conversations.replies")
    client = make_client(emulator, ConnectionErrorRetryHandler(max_retry_count=1, interval_calculator=NO_WAIT))
    thread = client.conversations_replies(channel=fx.GENERAL_CHANNEL, ts=fx.LATE_REPLY_ROOT_TS)
    assert len(thread["messages"]) == 4
    assert statuses(emulator, "conversations.replies") == [0, 200]
    emulator.inject("drop", count=2)
    with pytest.raises((RemoteDisconnected, URLError, ConnectionError)):
        client.auth_test()
    assert statuses(emulator, "auth.test") == [0, 0]


def test_inject_validates_arguments(emulator: SlackEmulator) -> None:
    with pytest.raises(ValueError):
        emulator.inject("404")
    with pytest.raises(ValueError):
        emulator.inject("429", count=0)


# -- exports and recording ---------------------------------------------------------------------------------------------


def channel_state(ws: SlackWorkspace) -> dict[str, tuple[Any, ...]]:
    return {
        c.id: (c.name, c.is_private, c.is_archived, c.is_ext_shared, c.members, c.messages, c.created, c.purpose)
        for c in ws.channels.values()
    }


def test_export_round_trip(workspace: SlackWorkspace, tmp_path: Path) -> None:
    workspace.write_export(tmp_path / "export")
    loaded = SlackWorkspace.from_export(tmp_path / "export", fx.CRAFTED_TEAM, fx.CRAFTED_DOMAIN)
    assert channel_state(loaded) == channel_state(workspace)
    assert all(c.is_member for c in loaded.channels.values())
    assert loaded.users == workspace.users and loaded.external_users == workspace.external_users
    root = tmp_path / "export"
    assert [c["id"] for c in json.loads((root / "groups.json").read_text())] == [fx.PRIVATE_CHANNEL, fx.HIDDEN_CHANNEL]
    assert "members" in json.loads((root / "groups.json").read_text())[0]
    late_day = json.loads((root / "general" / "2024-03-11.json").read_text())
    assert fx.LATE_REPLY_TS in [m["ts"] for m in late_day]  # a reply lands in the file of its own day
    first_day = [m["ts"] for m in json.loads((root / "general" / "2024-03-01.json").read_text())]
    assert first_day == sorted(first_day, key=Decimal) and fx.LATE_REPLY_ROOT_TS in first_day
    tomb_day = json.loads((root / "general" / "2024-03-05.json").read_text())
    assert any(m.get("subtype") == "tombstone" for m in tomb_day)


def test_bundled_export_round_trip(tmp_path: Path) -> None:
    bundled = fx.bundled_workspace()
    bundled.write_export(tmp_path)
    again = SlackWorkspace.from_export(tmp_path, bundled.team_id, bundled.domain)
    assert channel_state(again) == channel_state(bundled)
    assert sorted(p.name for p in (tmp_path / "ubuntu").iterdir()) == sorted(
        p.name for p in (BUNDLED_SLACK_EXPORT / "ubuntu").iterdir()
    )


def test_requests_are_recorded_in_order(emulator: SlackEmulator) -> None:
    client = make_client(emulator)
    client.auth_test()
    for _ in client.conversations_list(types="public_channel", exclude_archived=True, limit=2):
        pass
    client.conversations_history(channel=fx.GENERAL_CHANNEL, oldest=fx.EDITED_ROOT_TS, inclusive=True)
    client.api_call("conversations.history", http_verb="GET", params={"channel": fx.SHARED_CHANNEL, "limit": 1})
    recorded = emulator.requests
    assert [r.method for r in recorded] == [
        "auth.test",
        "conversations.list",
        "conversations.list",
        "conversations.history",
        "conversations.history",
    ]
    assert recorded[0] == RecordedRequest("auth.test", {}, 200)
    assert recorded[1].params == {"types": "public_channel", "exclude_archived": "1", "limit": "2"}
    assert recorded[2].params == {**recorded[1].params, "cursor": recorded[2].params["cursor"]}
    assert recorded[3].params == {"channel": fx.GENERAL_CHANNEL, "oldest": fx.EDITED_ROOT_TS, "inclusive": "1"}
    assert recorded[4].params == {"channel": fx.SHARED_CHANNEL, "limit": "1"}
    assert emulator.calls() == recorded
    assert len(emulator.calls("conversations.list")) == 2


def test_concurrent_clients(emulator: SlackEmulator) -> None:
    errors: list[BaseException] = []
    counts: list[int] = []

    def crawl() -> None:
        try:
            pages = history_pages(make_client(emulator), fx.GENERAL_CHANNEL, limit=4)
            counts.append(sum(len(p) for p in pages))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=crawl) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and counts == [fx.GENERAL_HISTORY_COUNT] * 8
    assert len(emulator.requests) == 8 * 8


def test_base_url_requires_start(workspace: SlackWorkspace) -> None:
    emu = SlackEmulator(workspace)
    with pytest.raises(RuntimeError):
        _ = emu.base_url
    emu.start()
    try:
        assert emu.base_url.startswith("http://127.0.0.1:") and emu.base_url.endswith("/api/")
    finally:
        emu.stop()
    emu.stop()  # idempotent
