"""Jira's webhooks, received (``POST /events/jira``): the shared secret checked (Jira Cloud signs with the
webhook's secret, ``X-Hub-Signature``; Data Center's webhooks carry the token in their URL), the delivery known by
``X-Atlassian-Webhook-Identifier`` (the same across Jira's retries), the change turned into its project's sync.

| webhookEvent | the smallest sync covering it |
|---|---|
| ``jira:issue_*``, ``comment_*``, ``worklog_*``, ``attachment_*``, ``issuelink_*`` (an issue's security level too) | the issue's project: its recent window, then its reconciliation (which removes deleted issues) |
| ``project_*`` (its permission scheme among them) | the project |
| ``user_*``, ``group_*`` | the directory alone (groups and Browse grants) |
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_pipeline.connectors.atlassian.webhooks import AtlassianWebhooks
from rag_pipeline.sources.pushed import SyncTarget, container_key, get_path


def jira_targets(payload: Mapping[str, Any]) -> list[SyncTarget]:
    """The syncs a Jira webhook payload asks for."""
    event = str(payload.get("webhookEvent") or "jira_change")[:64]
    if event.startswith(("user_", "group_")):
        return [SyncTarget(None, event)]
    project = get_path(payload, "issue", "fields", "project", "key") or get_path(payload, "project", "key")
    issue_key = get_path(payload, "issue", "key")
    if project is None and isinstance(issue_key, str) and "-" in issue_key:
        project = issue_key.rsplit("-", 1)[0]
    key = container_key(project)
    return [SyncTarget(key.upper(), event)] if key else []


class JiraWebhooks(AtlassianWebhooks):
    """The webhook receiver of one Jira site (``PushedChanges.receiver``), built from the webhook's secret."""

    def targets(self, payload: Mapping[str, Any], headers: Mapping[str, str]) -> list[SyncTarget]:
        return jira_targets(payload)
