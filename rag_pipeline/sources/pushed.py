"""The source kernel's part of pushed changes (Slack's Events API, Jira and Confluence webhooks): what a connector's
receiver returns and raises, the bounded memory of deliveries seen, and the shared-secret check webhooks use.

A receiver (``PushedChanges.receiver``: a class built from its secret) has ``max_body_bytes`` and
``read(body, headers, token) -> PushedChange``: it proves the request came from the product and says which
containers the change touches. It never says what to index: the targeted sync reads that from the API
(:mod:`rag_pipeline.serving.live_events`)."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

TOKEN_HEADER = "x-rag-webhook-token"
SIGNATURE_HEADER = "x-hub-signature"


class PushRefused(Exception):
    """A request that is not believed or not understood: ``status`` and a message naming neither secret nor body."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.field = field


@dataclass(frozen=True)
class SyncTarget:
    """What one change asks for: a sync of ``container``, or (``container`` None) of the source's directory."""

    container: str | None
    kind: str  # the event's type, e.g. "message_deleted", "jira:issue_updated"
    # Whether the change may touch the source's directory (people, groups, memberships): a targeted sync refreshes
    # it only then. Only a connector that knows a kind is content alone (a Slack message) says False.
    touches_directory: bool = True
    # Whether the change only adds content the sync's window reads (a new Slack message, not a reply, an edit or a
    # deletion): such a targeted sync skips the reconciliation, which only finds what vanished or changed.
    adds_only: bool = False


@dataclass(frozen=True)
class PushedChange:
    """A verified request: its delivery id (the same across the product's retries), the syncs it asks for, and
    ``reply``, an answer of its own (Slack's handshake) when it is no change."""

    delivery: str | None
    targets: list[SyncTarget] = field(default_factory=list)
    reply: dict[str, Any] | None = None


class PushReceiver(Protocol):
    """A connector's receiver of pushed changes."""

    max_body_bytes: int

    def read(self, body: bytes, headers: Mapping[str, str], token: str | None) -> PushedChange: ...


class SeenDeliveries:
    """Ids seen in the last ``seconds`` (at most ``limit`` kept, oldest forgotten first)."""

    def __init__(self, limit: int = 10_000, seconds: float = 3600.0, clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.seconds = seconds
        self.clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, delivery: str) -> bool:
        """Record ``delivery``; False when it was seen already (a retry or a replay)."""
        now = self.clock()
        with self._lock:
            while self._seen and now - next(iter(self._seen.values())) > self.seconds:
                self._seen.popitem(last=False)
            if delivery in self._seen:
                return False
            while len(self._seen) >= self.limit:
                self._seen.popitem(last=False)
            self._seen[delivery] = now
            return True

    def __len__(self) -> int:
        return len(self._seen)


def check_shared_secret(secret: bytes, body: bytes, headers: Mapping[str, str], token: str | None) -> None:
    """Raise :class:`PushRefused` unless ``body`` is signed with ``secret`` (``X-Hub-Signature: sha256=<hex>``,
    HMAC-SHA256 of the body: Jira Cloud's webhook secret, WebSub's scheme) or, for products that sign nothing, the
    secret itself is presented (``X-Rag-Webhook-Token`` or the URL's ``?token=``). Both in constant time;
    ``headers`` lower-cased."""
    signature = headers.get(SIGNATURE_HEADER)
    if signature is not None:
        method, _, given = signature.partition("=")
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
        if method.lower() != "sha256" or not hmac.compare_digest(given.strip().lower().encode(), expected.encode()):
            raise PushRefused(401, "X-Hub-Signature does not match the body (the webhook's secret)", "X-Hub-Signature")
        return
    presented = headers.get(TOKEN_HEADER) or token
    if not presented or not hmac.compare_digest(presented.encode(), secret):
        raise PushRefused(
            401, "this webhook needs X-Hub-Signature, X-Rag-Webhook-Token or ?token= with its secret", TOKEN_HEADER
        )


def json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or :class:`PushRefused` (400)."""
    import json

    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise PushRefused(400, "the body is not JSON", "body") from exc
    if not isinstance(payload, dict):
        raise PushRefused(400, "the body is not a JSON object", "body")
    return payload


def body_digest(body: bytes) -> str:
    """A delivery id for products that send none: the same body is the same delivery."""
    return hashlib.sha256(body).hexdigest()[:32]


def container_key(value: Any) -> str | None:
    """A project or space key or a channel id as a container name (ASCII letters, digits, ``_ ~ -``, not starting
    with ``-``: it becomes a command-line argument of the targeted sync), else None."""
    if not isinstance(value, str) or not 0 < len(value) <= 255 or not value.isascii() or value.startswith("-"):
        return None
    return value if all(c.isalnum() or c in "_~-" for c in value) else None


def get_path(payload: Mapping[str, Any], *path: str) -> Any:
    """``payload[a][b]…``, or None where a step is missing or not an object."""
    value: Any = payload
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value
