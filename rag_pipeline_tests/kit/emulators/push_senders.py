"""Senders of pushed changes, as the products send them: Slack's Events API (signed with slack-sdk's own
:class:`~slack_sdk.signature.SignatureVerifier`, ``X-Slack-Request-Timestamp`` and ``X-Slack-Signature``, retries with
``X-Slack-Retry-Num``) and Jira/Confluence webhooks (``X-Hub-Signature: sha256=…`` like Jira Cloud's webhook secret,
or the secret as a URL token, ``X-Atlassian-Webhook-Identifier`` per delivery). They post to a service on 127.0.0.1
with httpx; the Slack workspace model (:mod:`rag_pipeline_tests.kit.emulators.slack_workspace`) holds what the
events announce, and the service reads it back through the Web API emulator."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
import uuid
from typing import Any

import httpx
from slack_sdk.signature import SignatureVerifier


class SlackEventSender:
    """Posts Events API requests to ``url`` (the app's Request URL) signed with ``signing_secret``."""

    def __init__(self, url: str, signing_secret: str, team_id: str = "T0EVENTS") -> None:
        self.url = url
        self.signer = SignatureVerifier(signing_secret)
        self.team_id = team_id
        self._ids = itertools.count(1)

    def headers(self, body: bytes, timestamp: int | None = None) -> dict[str, str]:
        """Slack's signature headers for ``body`` at ``timestamp`` (default: now)."""
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        signature = self.signer.generate_signature(timestamp=stamp, body=body) or ""
        return {"Content-Type": "application/json", "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}

    def post(self, body: bytes, headers: dict[str, str] | None = None, **signing: Any) -> httpx.Response:
        """Post ``body`` signed (``headers`` replace or add to the signed ones)."""
        return httpx.post(self.url, content=body, headers={**self.headers(body, **signing), **(headers or {})},
                          timeout=10)  # fmt: skip

    def envelope(self, event: dict[str, Any], event_id: str | None = None) -> bytes:
        """An ``event_callback`` around ``event`` (a fresh ``event_id`` unless given)."""
        payload = {
            "token": "deprecated-verification-token",
            "team_id": self.team_id,
            "api_app_id": "A0RAGAPP01",
            "type": "event_callback",
            "event_id": event_id or f"Ev{next(self._ids):06d}{uuid.uuid4().hex[:6].upper()}",
            "event_time": int(time.time()),
            "event": event,
        }
        return json.dumps(payload).encode()

    def send(self, event: dict[str, Any], event_id: str | None = None, retry: int | None = None) -> httpx.Response:
        """Post one event; ``retry`` sends it as Slack's retry number ``retry``."""
        extra = {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"} if retry else None
        return self.post(self.envelope(event, event_id), extra)

    @staticmethod
    def message(channel: str, ts: str, user: str, text: str, thread_ts: str | None = None) -> dict[str, Any]:
        """A ``message`` event as Slack sends it for a new message (a reply with ``thread_ts``)."""
        event = {"type": "message", "channel": channel, "user": user, "text": text, "ts": ts, "event_ts": ts,
                 "channel_type": "channel"}  # fmt: skip
        return {**event, "thread_ts": thread_ts} if thread_ts else event

    @staticmethod
    def deleted(channel: str, ts: str) -> dict[str, Any]:
        """A ``message_deleted`` event (Slack sends no text of the deleted message)."""
        return {"type": "message", "subtype": "message_deleted", "channel": channel, "deleted_ts": ts,
                "hidden": True, "ts": f"{time.time():.6f}", "channel_type": "channel"}  # fmt: skip

    @staticmethod
    def member_joined(channel: str, user: str) -> dict[str, Any]:
        """A ``member_joined_channel`` event of a private channel."""
        return {"type": "member_joined_channel", "user": user, "channel": channel, "channel_type": "G",
                "event_ts": f"{time.time():.6f}"}  # fmt: skip


class WebhookSender:
    """Posts Jira or Confluence webhook deliveries to ``url`` with ``secret``: signed (``X-Hub-Signature``) or with
    the secret as ``?token=``."""

    def __init__(self, url: str, secret: str) -> None:
        self.url = url
        self.secret = secret.encode()

    def signature(self, body: bytes) -> str:
        return "sha256=" + hmac.new(self.secret, body, hashlib.sha256).hexdigest()

    def send(
        self, payload: dict[str, Any], *, how: str = "signed", delivery: str | None = None, retry: int = 0
    ) -> httpx.Response:
        """``how``: "signed", "token" (``?token=``), "header" (``X-Rag-Webhook-Token``) or "none"."""
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json",
                   "X-Atlassian-Webhook-Identifier": delivery or uuid.uuid4().hex}  # fmt: skip
        if retry:
            headers["X-Atlassian-Webhook-Retry"] = str(retry)
        params = {}
        if how == "signed":
            headers["X-Hub-Signature"] = self.signature(body)
        elif how == "token":
            params["token"] = self.secret.decode()
        elif how == "header":
            headers["X-Rag-Webhook-Token"] = self.secret.decode()
        return httpx.post(self.url, content=body, headers=headers, params=params, timeout=10)
