"""Workspaces for the Slack emulator: the bundled export, a crafted edge-case workspace, and a synthetic big one.

* :func:`bundled_workspace` loads the bundled Ubuntu IRC export (one channel, ``C0UBUNTU00`` "ubuntu").
* :func:`crafted_workspace` is small and hand-made: every Slack edge case the incremental sync has to handle
  (late thread replies, edits of roots and replies, broadcasts, tombstones, bot and system messages, Slack Connect
  users, private / hidden / not-joined / archived channels). The module constants name the interesting
  timestamps so tests can refer to them.
* :func:`synthetic_workspace` spreads the bundled export's real messages over many channels and days, for
  benchmarks.

Every call builds a fresh, independent workspace.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from rag_pipeline.connectors.slack import settings as slack_settings
from rag_pipeline_tests.kit.emulators.slack_workspace import BOT_ID, BOT_USER_ID, SlackWorkspace

# -- bundled export ---------------------------------------------------------------------------------------------------

BUNDLED_CHANNEL = "C0UBUNTU00"


def bundled_workspace() -> SlackWorkspace:
    """The bundled Slack export (``rag_pipeline/data/slack_ubuntu/export``) as a workspace, messages as stored."""
    return SlackWorkspace.from_export(
        slack_settings.BUNDLED_SLACK_EXPORT, slack_settings.BUNDLED_SLACK_TEAM, slack_settings.BUNDLED_SLACK_DOMAIN
    )


# -- crafted workspace ------------------------------------------------------------------------------------------------

CRAFTED_TEAM = "T0CRAFTED"
CRAFTED_DOMAIN = "crafted.slack.com"
PARTNER_TEAM = "T0PARTNER"

ALICE = "U0ALICE001"
BOB = "U0BOB00001"
CAROL = "U0CAROL001"
DAVE = "U0DAVE0001"
FRANK = "U0FRANK001"  # a deactivated user (deleted: true) who wrote one old root in #general
BOT_USER = BOT_USER_ID  # "U0BOT00001", the app's bot user (is_bot: true); auth.test answers with it
EXTERNAL_USER = "U0EXTERN01"  # "erin" of T0PARTNER: only in external_users (users.info), never in users.list
WEBHOOK_BOT_ID = "B0WEBHOOK1"  # the legacy bot of the bot_message
APP_ID = "A0RAGAPP01"

GENERAL_CHANNEL = "C0GENERAL1"  # public, member
SHARED_CHANNEL = "C0SHARED01"  # public, Slack Connect (is_ext_shared) with T0PARTNER
PRIVATE_CHANNEL = "G0PRIVATE1"  # private "security", the bot is a member
HIDDEN_CHANNEL = "G0HIDDEN01"  # private "hr-private", the bot is NOT a member: never listed nor readable
NOJOIN_CHANNEL = "C0NOJOIN01"  # public "watercooler", bot not joined: history -> not_in_channel
ARCHIVED_CHANNEL = "C0ARCHIVE1"  # public "old-project", archived, member

# 2024-03-01 00:00:00 UTC
MARCH_1 = 1709251200


def march_ts(day: int, hour: int, minute: int = 0, second: int = 0) -> str:
    """The Slack ts (``"%.6f"``) of 2024-03-<day> <hour>:<minute>:<second> UTC."""
    return f"{MARCH_1 + (day - 1) * 86400 + hour * 3600 + minute * 60 + second:.6f}"


# Plain roots in #general: one each morning 03-01..03-12 and one each afternoon 03-01..03-08.
MORNING_ROOT_TSS = tuple(march_ts(day, 8) for day in range(1, 13))
AFTERNOON_ROOT_TSS = tuple(march_ts(day, 16, 30) for day in range(1, 9))
FRANK_ROOT_TS = AFTERNOON_ROOT_TSS[0]  # written by the deactivated user

CHANNEL_JOIN_TS = march_ts(1, 9)  # subtype channel_join (Dave joins)
# A thread on 03-01 10:00 with two same-day replies and a LATE reply 10 days later.
LATE_REPLY_ROOT_TS = march_ts(1, 10)
SAME_DAY_REPLY_TSS = (march_ts(1, 10, 5), march_ts(1, 10, 20))
LATE_REPLY_TS = march_ts(11, 9)
# A root posted 03-02 and edited 03-05 (edited.ts on 03-05, ts unchanged).
EDITED_ROOT_TS = march_ts(2, 11)
EDIT_TS = march_ts(5, 14)
EDITED_ROOT_ORIGINAL_TEXT = "Release train for 24.04 leaves on Friday"
EDITED_ROOT_TEXT = "Release train for 24.04 leaves on Monday (moved)"
# A thread whose (only) reply is edited on a later day.
EDITED_REPLY_ROOT_TS = march_ts(3, 9)
EDITED_REPLY_TS = march_ts(3, 9, 15)
REPLY_EDIT_TS = march_ts(6, 12)
EDITED_REPLY_TEXT = "The staging DB password lives in the vault, path infra/staging (updated)"
# A thread with a plain reply then a thread_broadcast reply (stored once; shows in history and replies).
BROADCAST_ROOT_TS = march_ts(4, 13)
BROADCAST_PLAIN_REPLY_TS = march_ts(4, 13, 5)
BROADCAST_TS = march_ts(4, 13, 10)
# A root deleted after two replies: a tombstone that keeps its replies.
TOMBSTONE_ROOT_TS = march_ts(5, 10)
TOMBSTONE_REPLY_TSS = (march_ts(5, 10, 10), march_ts(5, 10, 30))
TOMBSTONE_ORIGINAL_TEXT = "Posting the on-call rota in the wrong channel, oops"
BOT_MESSAGE_TS = march_ts(6, 7)  # subtype bot_message: bot_id + username, no user
APP_BOT_MESSAGE_TS = march_ts(7, 7, 30)  # user U0BOT00001 + bot_id + bot_profile, no subtype
EXTERNAL_MESSAGE_TS = march_ts(8, 10)  # by U0EXTERN01, user_team T0PARTNER
MENTION_TS = march_ts(9, 11)  # mentions <@U0BOB00001> and <#C0GENERAL1|general>
MENTION_TEXT = f"<@{BOB}> can you pin the runbook in <#{GENERAL_CHANNEL}|general>? it covers the ARM runners"

# #general totals: top-level messages (roots incl. tombstone, bot, join...), and history items (+ 1 broadcast).
GENERAL_ROOT_COUNT = 30
GENERAL_HISTORY_COUNT = GENERAL_ROOT_COUNT + 1
GENERAL_REPLY_COUNT = 10  # 3 late-thread + 1 edited + 2 broadcast-thread (incl. broadcast) + 2 tombstone + 2 extra

SHARED_ROOT_TS = march_ts(4, 9)
SHARED_EXTERNAL_TS = march_ts(4, 9, 30)  # a root by the external user
SHARED_REPLY_TS = march_ts(4, 9, 45)  # Bob's reply to it

PRIVATE_THREAD_ROOT_TS = march_ts(2, 14)
PRIVATE_REPLY_TSS = (march_ts(2, 14, 10), march_ts(2, 14, 20))
PRIVATE_ROOT_TS = march_ts(7, 10)

HIDDEN_MESSAGE_TS = march_ts(3, 15)
HIDDEN_TEXT = "Salary review spreadsheet for Q2 is in the HR drive"  # must never be served
NOJOIN_MESSAGE_TS = march_ts(6, 12, 30)
ARCHIVED_MESSAGE_TS = march_ts(1, 12)


def _user(user_id: str, name: str, real_name: str, *, team: str = CRAFTED_TEAM, **extra: Any) -> dict[str, Any]:
    user: dict[str, Any] = {
        "id": user_id,
        "team_id": team,
        "name": name,
        "real_name": real_name,
        "deleted": False,
        "is_bot": False,
        # Slack's user objects always carry the guest flags; a record without them is not a member's (issue 47).
        "is_restricted": False,
        "is_ultra_restricted": False,
        "profile": {"display_name": name, "real_name": real_name},
    }
    user.update(extra)
    return user


def _msg(ts: str, user: str | None, text: str, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "message", "ts": ts, "text": text}
    if user is not None:
        message["user"] = user
        message["team"] = CRAFTED_TEAM
    message.update(extra)
    return message


def _reply(root_ts: str, ts: str, user: str, text: str, **extra: Any) -> dict[str, Any]:
    return _msg(ts, user, text, thread_ts=root_ts, **extra)


def _rich_text_mention_blocks() -> list[dict[str, Any]]:
    return [
        {
            "type": "rich_text",
            "block_id": "mnt01",
            "elements": [
                {
                    "type": "rich_text_section",
                    "elements": [
                        {"type": "user", "user_id": BOB},
                        {"type": "text", "text": " can you pin the runbook in "},
                        {"type": "channel", "channel_id": GENERAL_CHANNEL},
                        {"type": "text", "text": "? it covers the ARM runners"},
                    ],
                }
            ],
        }
    ]


_MORNING_TOPICS = (
    "Standup: grub-install fails on the new NVMe laptops, investigating",
    "Standup: apt mirror sync finished overnight, 3 packages held back",
    "Standup: kernel 6.8 regression on the wifi driver still open",
    "Standup: snapd refresh hold configured on the build farm",
    "Standup: netplan migration of the lab switches is half done",
    "Standup: disk usage on the CI cache hit 91 percent",
    "Standup: cloud-init userdata templates reviewed",
    "Standup: ufw rules for the metrics exporters merged",
    "Standup: systemd-resolved DNS timeouts traced to the VPN",
    "Standup: LXD cluster upgrade scheduled for Thursday",
    "Standup: backups verified, restore drill passed",
    "Standup: docs site rebuilt with the new theme",
)
_AFTERNOON_TOPICS = (
    "Reminder: the old build server will be switched off at the end of the month",
    "How do I pin a package version with apt preferences?",
    "Tip: `journalctl -u ssh --since today` shows today's ssh logins",
    "Who owns the printer queue on floor 3?",
    "Lunch and learn on Friday: ZFS snapshots",
    "Is anyone else seeing slow apt update from the eu mirror?",
    "The VPN certificate expires next week, please renew",
    "Retro notes are in the wiki",
)


def crafted_workspace() -> SlackWorkspace:
    """A hand-made workspace (team T0CRAFTED, crafted.slack.com, March 2024 UTC) covering the edge cases."""
    ws = SlackWorkspace(team_id=CRAFTED_TEAM, domain=CRAFTED_DOMAIN, team_name="Crafted")
    ws.users = [
        _user(ALICE, "alice", "Alice Anders"),
        _user(BOB, "bob", "Bob Brown"),
        _user(CAROL, "carol", "Carol Chen"),
        _user(DAVE, "dave", "Dave Diaz"),
        _user(FRANK, "frank", "Frank Former", deleted=True),
        _user(
            BOT_USER,
            "rag-bot",
            "RAG Bot",
            is_bot=True,
            profile={"display_name": "RAG Bot", "real_name": "RAG Bot", "bot_id": BOT_ID, "api_app_id": APP_ID},
        ),
    ]
    ws.external_users = {EXTERNAL_USER: _user(EXTERNAL_USER, "erin", "Erin External", team=PARTNER_TEAM)}

    created = MARCH_1 - 30 * 86400
    general = ws.add_channel(
        GENERAL_CHANNEL,
        "general",
        members=[ALICE, BOB, CAROL, DAVE, BOT_USER],
        created=created,
        purpose="Company-wide announcements and work-based matters",
    )
    people = (ALICE, BOB, CAROL, DAVE)
    roots: list[dict[str, Any]] = []
    for i, (ts, text) in enumerate(zip(MORNING_ROOT_TSS, _MORNING_TOPICS, strict=True)):
        roots.append(_msg(ts, people[i % 4], text, client_msg_id=f"00000000-0000-4000-8000-{i:012d}"))
    for i, (ts, text) in enumerate(zip(AFTERNOON_ROOT_TSS, _AFTERNOON_TOPICS, strict=True)):
        roots.append(_msg(ts, FRANK if ts == FRANK_ROOT_TS else people[(i + 1) % 4], text))
    roots += [
        _msg(CHANNEL_JOIN_TS, DAVE, f"<@{DAVE}> has joined the channel", subtype="channel_join"),
        _msg(LATE_REPLY_ROOT_TS, ALICE, "Has anyone seen the deploy pipeline fail on the ARM runners?"),
        _msg(EDITED_ROOT_TS, BOB, EDITED_ROOT_ORIGINAL_TEXT),
        _msg(EDITED_REPLY_ROOT_TS, CAROL, "Where do we keep the staging DB credentials?"),
        _msg(BROADCAST_ROOT_TS, DAVE, "Proposal: move the nightly builds to 02:00 UTC"),
        _msg(TOMBSTONE_ROOT_TS, BOB, TOMBSTONE_ORIGINAL_TEXT),
        _msg(
            BOT_MESSAGE_TS,
            None,
            "Deploy #1234 of api-server finished: success",
            subtype="bot_message",
            bot_id=WEBHOOK_BOT_ID,
            username="deploy-bot",
        ),
        _msg(
            APP_BOT_MESSAGE_TS,
            BOT_USER,
            "Daily digest: 4 new threads, 2 unanswered questions",
            bot_id=BOT_ID,
            app_id=APP_ID,
            bot_profile={"id": BOT_ID, "app_id": APP_ID, "name": "RAG Bot", "deleted": False, "team_id": CRAFTED_TEAM},
        ),
        _msg(
            EXTERNAL_MESSAGE_TS,
            EXTERNAL_USER,
            "Hi from the partner team, our integration tests pass against your staging",
            team=PARTNER_TEAM,
            user_team=PARTNER_TEAM,
            source_team=PARTNER_TEAM,
        ),
        _msg(MENTION_TS, CAROL, MENTION_TEXT, blocks=_rich_text_mention_blocks()),
    ]
    for message in sorted(roots, key=lambda m: Decimal(m["ts"])):
        ws.post(GENERAL_CHANNEL, message)
    assert len(roots) == GENERAL_ROOT_COUNT

    replies = [
        _reply(LATE_REPLY_ROOT_TS, SAME_DAY_REPLY_TSS[0], BOB, "Yes, the qemu-user-static package is missing there"),
        _reply(LATE_REPLY_ROOT_TS, SAME_DAY_REPLY_TSS[1], CAROL, "I'll add it to the runner image"),
        _reply(LATE_REPLY_ROOT_TS, LATE_REPLY_TS, DAVE, "Late follow-up: fixed for good by pinning binfmt-support"),
        _reply(EDITED_REPLY_ROOT_TS, EDITED_REPLY_TS, ALICE, "In the vault, ask Bob for access"),
        _reply(BROADCAST_ROOT_TS, BROADCAST_PLAIN_REPLY_TS, BOB, "Fine by me"),
        _reply(
            BROADCAST_ROOT_TS,
            BROADCAST_TS,
            ALICE,
            "Agreed: nightly builds move to 02:00 UTC from next week",
            subtype="thread_broadcast",
        ),
        _reply(TOMBSTONE_ROOT_TS, TOMBSTONE_REPLY_TSS[0], CAROL, "I think this was meant for #oncall"),
        _reply(TOMBSTONE_ROOT_TS, TOMBSTONE_REPLY_TSS[1], ALICE, "Moved it there, deleting"),
        _reply(MORNING_ROOT_TSS[0], march_ts(1, 8, 30), BOB, "Which laptop model exactly?"),
        _reply(MORNING_ROOT_TSS[0], march_ts(1, 8, 45), ALICE, "The X1 gen 12, firmware 1.18"),
    ]
    assert len(replies) == GENERAL_REPLY_COUNT
    for message in replies:
        ws.post(GENERAL_CHANNEL, message)
    ws.edit(GENERAL_CHANNEL, EDITED_ROOT_TS, EDITED_ROOT_TEXT, EDIT_TS)
    ws.edit(GENERAL_CHANNEL, EDITED_REPLY_TS, EDITED_REPLY_TEXT, REPLY_EDIT_TS)
    ws.delete(GENERAL_CHANNEL, TOMBSTONE_ROOT_TS)
    assert general.messages[TOMBSTONE_ROOT_TS]["subtype"] == "tombstone"

    ws.add_channel(
        SHARED_CHANNEL,
        "partner-shared",
        is_ext_shared=True,
        members=[ALICE, BOB, EXTERNAL_USER],
        created=created + 86400,
        purpose="Slack Connect channel with the partner org",
    )
    ws.post(SHARED_CHANNEL, _msg(SHARED_ROOT_TS, ALICE, "Welcome to the shared channel, partners!"))
    ws.post(
        SHARED_CHANNEL,
        _msg(
            SHARED_EXTERNAL_TS,
            EXTERNAL_USER,
            "Thanks! Could you share the API rate limits for the staging tenant?",
            team=PARTNER_TEAM,
            user_team=PARTNER_TEAM,
            source_team=PARTNER_TEAM,
        ),
    )
    ws.post(SHARED_CHANNEL, _reply(SHARED_EXTERNAL_TS, SHARED_REPLY_TS, BOB, "50 requests per minute per token"))

    ws.add_channel(
        PRIVATE_CHANNEL,
        "security",
        is_private=True,
        members=[ALICE, CAROL, BOT_USER],
        created=created + 2 * 86400,
        purpose="Security team",
    )
    ws.post(PRIVATE_CHANNEL, _msg(PRIVATE_THREAD_ROOT_TS, CAROL, "Rotating the VPN certificates on Friday night"))
    ws.post(PRIVATE_CHANNEL, _reply(PRIVATE_THREAD_ROOT_TS, PRIVATE_REPLY_TSS[0], ALICE, "Do we notify the partner?"))
    ws.post(PRIVATE_CHANNEL, _reply(PRIVATE_THREAD_ROOT_TS, PRIVATE_REPLY_TSS[1], CAROL, "Yes, by Thursday"))
    ws.post(PRIVATE_CHANNEL, _msg(PRIVATE_ROOT_TS, ALICE, "Pentest report for Q1 is uploaded to the vault"))

    ws.add_channel(
        HIDDEN_CHANNEL,
        "hr-private",
        is_private=True,
        is_member=False,
        members=[ALICE, DAVE],
        created=created + 3 * 86400,
    )
    ws.post(HIDDEN_CHANNEL, _msg(HIDDEN_MESSAGE_TS, DAVE, HIDDEN_TEXT))

    ws.add_channel(NOJOIN_CHANNEL, "watercooler", is_member=False, members=[BOB, DAVE], created=created + 4 * 86400)
    ws.post(NOJOIN_CHANNEL, _msg(NOJOIN_MESSAGE_TS, BOB, "Anyone up for table tennis at 5?"))

    ws.add_channel(ARCHIVED_CHANNEL, "old-project", is_archived=True, members=[ALICE, BOB], created=created)
    ws.post(ARCHIVED_CHANNEL, _msg(ARCHIVED_MESSAGE_TS, ALICE, "Project Falcon is wrapped up, archiving this channel"))
    return ws


# -- synthetic workspace ----------------------------------------------------------------------------------------------

SYNTH_TEAM = "T0SYNTH"
SYNTH_DOMAIN = "synth.slack.com"
# Stored keys of the export that describe the original data, not the synthetic placement.
_DROPPED_KEYS = frozenset(
    {"_line", "_file", "replies", "reply_count", "reply_users", "reply_users_count", "latest_reply"}
)


def synthetic_channel_id(index: int) -> str:
    """The id of the index-th synthetic channel: ``C0SYN00000``, ``C0SYN00001``, ..."""
    return f"C0SYN{index:05d}"


def synthetic_workspace(channels: int, days: int, start: str = "2024-01-01", seed: int = 0) -> SlackWorkspace:
    """The bundled export's messages spread over ``channels`` public channels × ``days`` consecutive UTC days.

    Threads (a root and its replies) and standalone messages are the units: shuffled (deterministically, by
    ``seed``) and dealt round-robin to the channel-days, so each channel-day gets a similar share. When there are
    more channel-days than units, units are reused so every channel-day has at least one. Within its day a unit's
    root gets an evenly spaced slot and its replies keep their order after the root (their original offsets,
    compressed when needed to stay within the day). Texts, users and subtypes are kept; ``ts``/``thread_ts`` are
    new, stale thread summaries and ``_line``/``_file`` are dropped. Channels are ``synth-00000`` ...
    (:func:`synthetic_channel_id`), members are their authors plus the bot. Team T0SYNTH, synth.slack.com.
    """
    if channels < 1 or days < 1:
        raise ValueError("channels and days must be >= 1")
    source = bundled_workspace()
    base = int(datetime.strptime(start, "%Y-%m-%d").replace(tzinfo=UTC).timestamp())

    units: list[list[dict[str, Any]]] = []
    for channel in source.channels.values():
        by_root: dict[str, list[dict[str, Any]]] = {}
        for message in channel.sorted_messages():
            thread_ts = message.get("thread_ts")
            if thread_ts and thread_ts != message["ts"] and thread_ts in by_root:
                by_root[thread_ts].append(message)
            else:
                by_root[message["ts"]] = [message]
        units.extend(by_root.values())
    rng = random.Random(seed)
    rng.shuffle(units)

    cells = channels * days
    total = max(len(units), cells)
    per_cell: list[list[list[dict[str, Any]]]] = [[] for _ in range(cells)]
    for k in range(total):
        per_cell[k % cells].append(units[k % len(units)])

    ws = SlackWorkspace(team_id=SYNTH_TEAM, domain=SYNTH_DOMAIN, team_name="Synth")
    ws.users = [{**u, "team_id": SYNTH_TEAM} for u in source.users]
    ws.users.append(
        {
            "id": BOT_USER,
            "team_id": SYNTH_TEAM,
            "name": "rag-bot",
            "real_name": "RAG Bot",
            "deleted": False,
            "is_bot": True,
            "profile": {"display_name": "RAG Bot", "real_name": "RAG Bot", "bot_id": BOT_ID},
        }
    )
    day_us = 86400 * 1_000_000
    for c in range(channels):
        channel = ws.add_channel(synthetic_channel_id(c), f"synth-{c:05d}", created=base - 86400)
        authors: set[str] = set()
        used: set[int] = set()
        for d in range(days):
            cell_units = per_cell[d * channels + c]
            day_start_us = (base + d * 86400) * 1_000_000
            slot_us = day_us // len(cell_units)
            for slot, unit in enumerate(cell_units):
                root_us = day_start_us + slot * slot_us + rng.randrange(max(slot_us // 4, 1))
                orig_root_us = _micros(unit[0]["ts"])
                offsets = [_micros(m["ts"]) - orig_root_us for m in unit]
                room = day_start_us + day_us - 1 - root_us
                span = offsets[-1]
                if span > room > 0:
                    offsets = [o * room // span for o in offsets]
                new_root_ts = ""
                for message, offset in zip(unit, offsets, strict=True):
                    t_us = root_us + max(offset, 0)
                    while t_us in used:
                        t_us += 1
                    used.add(t_us)
                    new_ts = f"{t_us // 1_000_000}.{t_us % 1_000_000:06d}"
                    copy_ = {k: v for k, v in message.items() if k not in _DROPPED_KEYS}
                    copy_["ts"] = new_ts
                    if message is unit[0]:
                        new_root_ts = new_ts
                        if len(unit) > 1 or "thread_ts" in message:
                            copy_["thread_ts"] = new_ts
                    else:
                        copy_["thread_ts"] = new_root_ts
                    channel.messages[new_ts] = copy_
                    if copy_.get("user") and copy_["user"] != "USLACKBOT":
                        authors.add(copy_["user"])
        channel.members = [*sorted(authors), BOT_USER]
    return ws


def _micros(ts: str) -> int:
    seconds, _, fraction = ts.partition(".")
    return int(seconds) * 1_000_000 + int((fraction + "000000")[:6])
