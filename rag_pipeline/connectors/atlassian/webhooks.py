"""What Jira's and Confluence's webhook receivers share: the shared-secret check, the JSON body, and the delivery
known by ``X-Atlassian-Webhook-Identifier`` (the same across the product's retries) or, without it, the body's
digest. Each product's receiver says only which syncs its payload asks for (:meth:`AtlassianWebhooks.targets`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_pipeline.sources.pushed import PushedChange, SyncTarget, body_digest, check_shared_secret, json_object

DELIVERY_HEADER = "x-atlassian-webhook-identifier"


class AtlassianWebhooks:
    """The webhook receiver of one Atlassian site (``PushedChanges.receiver``), built from the shared secret."""

    max_body_bytes = 1024 * 1024  # an issue or page payload carries its fields, a long body included

    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()

    def targets(self, payload: Mapping[str, Any], headers: Mapping[str, str]) -> list[SyncTarget]:
        """The syncs a verified payload asks for (``headers``: lower-cased names)."""
        raise NotImplementedError

    def read(self, body: bytes, headers: Mapping[str, str], token: str | None = None) -> PushedChange:
        lowered = {k.lower(): v for k, v in headers.items()}
        check_shared_secret(self._secret, body, lowered, token)
        payload = json_object(body)
        delivery = lowered.get(DELIVERY_HEADER, "")[:64] or body_digest(body)
        return PushedChange(delivery, self.targets(payload, lowered))
