"""What the directory and ``explain`` ask of Slack: its groups in words, the channel a thread id names, and why
a guest is not admitted (light: the registry imports it)."""

from __future__ import annotations

from collections.abc import Sequence

SOURCE = "slack"


def describe_group(parts: Sequence[str]) -> str | None:
    """``slack:<team>:members`` in words."""
    if len(parts) == 3 and parts[2] == "members":
        return f"members of Slack workspace {parts[1]}"
    return None


def thread_channel(document_id: str) -> str | None:
    """The channel id of a thread id ``slack:<team>:<channel>:<ts>``."""
    parts = document_id.split(":")
    return parts[2] if parts[0] == SOURCE and len(parts) >= 4 else None


def guest_note(account_id: str, groups: Sequence[str]) -> str | None:
    """A guest reads only the private channels it is in; the workspace group of a public channel never admits it."""
    if any(g.startswith(f"{SOURCE}:") for g in groups):
        return (
            f"slack account {account_id} is a guest: guests read only the private "
            "channels they are in; public channels admit full members of the workspace"
        )
    return None
