"""What ``explain`` asks of Jira: its ACL groups in words (light: the registry imports it)."""

from __future__ import annotations

from collections.abc import Sequence

from rag_pipeline.connectors.atlassian.groups import describe_site_group

_DESCRIBED = {
    "project": "people who may browse Jira project {name} on {site}",
    "security": "Jira security level {name} on {site}",
    "group": "Jira group {name} on {site}",
}


def describe_group(parts: Sequence[str]) -> str | None:
    """``jira:<site>:<kind>:<name>`` (project, security level, group, project role) in words."""
    if len(parts) >= 5 and parts[2] == "role":
        return f"project role {':'.join(parts[4:])} in Jira project {parts[3]} on {parts[1]}"
    return describe_site_group(parts, "jira", _DESCRIBED)
