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

from rag_pipeline.sources.pushed import (
    PushedChange,
    SyncTarget,
    body_digest,
    check_shared_secret,
    container_key,
    get_path,
    json_object,
)

DELIVERY_HEADER = "x-atlassian-webhook-identifier"


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


class JiraWebhooks:
    """The webhook receiver of one Jira site (``LiveApi.push_receiver``), built from the webhook's secret."""

    max_body_bytes = 1024 * 1024  # an issue payload carries its fields, a long description included

    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()

    def read(self, body: bytes, headers: Mapping[str, str], token: str | None = None) -> PushedChange:
        lowered = {k.lower(): v for k, v in headers.items()}
        check_shared_secret(self._secret, body, lowered, token)
        payload = json_object(body)
        return PushedChange(lowered.get(DELIVERY_HEADER, "")[:64] or body_digest(body), jira_targets(payload))
