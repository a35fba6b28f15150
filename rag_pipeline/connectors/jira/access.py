"""What ``explain`` asks of Jira: its ACL groups in words (light: the registry imports it)."""

from __future__ import annotations

from collections.abc import Sequence


def describe_group(parts: Sequence[str]) -> str | None:
    """``jira:<site>:<kind>:<name>`` (project, security level, group, project role) in words."""
    if len(parts) < 4:
        return None
    site, kind, name = parts[1], parts[2], ":".join(parts[3:])
    if kind == "project":
        return f"people who may browse Jira project {name} on {site}"
    if kind == "security":
        return f"Jira security level {name} on {site}"
    if kind == "group":
        return f"Jira group {name} on {site}"
    if kind == "role" and len(parts) >= 5:
        return f"project role {':'.join(parts[4:])} in Jira project {parts[3]} on {site}"
    return None
