"""Confluence's webhooks, received (``POST /events/confluence``): Confluence signs nothing, so the webhook's URL
(``?token=``) or an ``X-Rag-Webhook-Token`` header carries the shared secret (``X-Hub-Signature`` is honoured where a
proxy signs); the delivery is known by ``X-Atlassian-Webhook-Identifier`` or its body's digest; the change becomes
its space's sync.

| event | the smallest sync covering it |
|---|---|
| ``page_*``, ``blog_*``, ``comment_*``, ``attachment_*``, ``content_*`` (restrictions too), ``space_*`` (permissions too) | the space: its recent window, then its reconciliation (which removes deleted pages, rewrites ACLs) |
| ``user_*``, ``group_*`` | the directory alone |
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_pipeline.connectors.atlassian.webhooks import AtlassianWebhooks
from rag_pipeline.sources.pushed import SyncTarget, container_key, get_path

SPACE_PATHS = (
    ("page", "spaceKey"), ("page", "space", "key"), ("blog", "spaceKey"), ("blogpost", "spaceKey"),
    ("comment", "parent", "spaceKey"), ("comment", "spaceKey"), ("attachment", "spaceKey"),
    ("content", "space", "key"), ("content", "spaceKey"), ("space", "key"), ("spaceKey",),
)  # fmt: skip


def confluence_targets(payload: Mapping[str, Any], event: str) -> list[SyncTarget]:
    """The syncs a Confluence webhook payload asks for (``event``: its name, from the body or a header)."""
    event = event[:64] or "confluence_change"
    if event.startswith(("user_", "group_")):
        return [SyncTarget(None, event)]
    for path in SPACE_PATHS:
        if (key := container_key(get_path(payload, *path))) is not None:
            return [SyncTarget(key, event)]
    return []


class ConfluenceWebhooks(AtlassianWebhooks):
    """The webhook receiver of one Confluence site (``PushedChanges.receiver``), built from the shared secret."""

    def targets(self, payload: Mapping[str, Any], headers: Mapping[str, str]) -> list[SyncTarget]:
        event = str(payload.get("event") or payload.get("webhookEvent") or headers.get("x-event-key") or "")
        return confluence_targets(payload, event)
