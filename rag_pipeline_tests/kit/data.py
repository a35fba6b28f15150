"""Small crafted sources: a Slack export (public C0PUB, private G0PRIV), Jira issues and gzipped dumps, timestamps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

TEAM = "T0TEST"


def write_slack_export(
    root: Path, days: dict[str, list[dict]], private_days: dict[str, list[dict]] | None = None
) -> Path:
    """A Slack export with public channel C0PUB ('general') and private channel G0PRIV ('secret')."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "channels.json").write_text(json.dumps([{"id": "C0PUB", "name": "general", "members": ["U1", "U2"]}]))
    (root / "groups.json").write_text(json.dumps([{"id": "G0PRIV", "name": "secret", "members": ["U1", "U3"]}]))
    (root / "users.json").write_text(
        json.dumps(
            [
                {"id": "U1", "name": "alice", "real_name": "Alice A"},
                {"id": "U2", "name": "bob", "profile": {"display_name": "Bobby"}},
                {"id": "U3", "name": "carol", "real_name": "Carol C"},
            ]
        )
    )
    for folder, content in (("general", days), ("secret", private_days or {})):
        (root / folder).mkdir(exist_ok=True)
        for day, messages in content.items():
            (root / folder / f"{day}.json").write_text(json.dumps(messages))
    return root


# 2024-03-01 00:00:00 UTC = 1709251200
D1 = 1709251200
D2 = D1 + 86400


def ts(seconds: float) -> str:
    return f"{seconds:.6f}"


def basic_days() -> dict[str, list[dict]]:
    """Two days of #general: a thread with a tombstoned root, a broadcast, system noise and markup."""
    root = ts(D1 + 100)
    return {
        "2024-03-01": [
            {"type": "message", "subtype": "channel_join", "user": "U2", "text": "<@U2> has joined", "ts": ts(D1 + 10)},
            {
                "type": "message",
                "subtype": "tombstone",
                "user": "USLACKBOT",
                "text": "This message was deleted.",
                "ts": root,
                "thread_ts": root,
                "reply_count": 2,
                "latest_reply": ts(D1 + 300),
            },
            {
                "type": "message",
                "user": "U1",
                "text": "try <https://help.ubuntu.com|the docs> &amp; ask <@U2> :smile:",
                "ts": ts(D1 + 200),
                "thread_ts": root,
            },
            {
                "type": "message",
                "subtype": "thread_broadcast",
                "user": "U2",
                "text": "it worked, see <#C0PUB|general>",
                "ts": ts(D1 + 300),
                "thread_ts": root,
            },
            {"type": "message", "user": "U2", "text": "standalone question about grub at 10:30:45", "ts": ts(D1 + 500)},
            {
                "type": "message",
                "subtype": "bot_message",
                "bot_id": "B1",
                "text": "deploy finished",
                "ts": ts(D1 + 600),
            },
        ],
        "2024-03-02": [
            # The broadcast reply also appears in the thread file of the next day export (dedupe by ts).
            {
                "type": "message",
                "subtype": "thread_broadcast",
                "user": "U2",
                "text": "it worked, see <#C0PUB|general>",
                "ts": ts(D1 + 300),
                "thread_ts": root,
            },
            {
                "type": "message",
                "user": "U1",
                "text": "edited text",
                "ts": ts(D2 + 50),
                "edited": {"user": "U1", "ts": ts(D2 + 900)},
            },
        ],
    }


def jira_issue(issue_id: str, key: str, updated: str, description=None, comments=(), **fields) -> dict:
    project = key.split("-")[0]
    return {
        "id": issue_id,
        "key": key,
        "fields": {
            "project": {"key": project, "name": f"Project {project}"},
            "summary": fields.pop("summary", f"Summary of {key}"),
            "description": description,
            "created": "2024-03-01T08:00:00.000+0000",
            "updated": updated,
            "status": {"name": "Open"},
            "issuetype": {"name": "Bug"},
            "reporter": {"displayName": "Reporter R"},
            "comment": {"comments": list(comments)},
            **fields,
        },
    }


def write_jira_dump(path: Path, issues: list[dict], extra_lines: list[str] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for issue in issues:
            handle.write(json.dumps(issue) + "\n")
        for line in extra_lines:
            handle.write(line + "\n")
    return path
