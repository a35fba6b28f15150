"""The service's receivers of pushed changes (``POST /events/<source>``), built from its settings: each registered
source whose live API takes pushed changes (``LiveApi.push``) and whose secret is set gets one; all feed one
:class:`~rag_pipeline.serving.live_events.TargetedSyncs` over the ingestion API's launcher.

What every receiver shares is here: the deliveries already seen (the products' retries, bounded memory) queue
nothing again, and the body limit is the receiver's own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.serving.live_events import TargetedSyncs
from rag_pipeline.settings import ServeSettings
from rag_pipeline.sources.pushed import PushReceiver, PushRefused, SeenDeliveries
from rag_pipeline.sources.registry import PushedChanges, load_object, registered_sources


def _pushes() -> dict[str, PushedChanges]:
    """Per source that can receive pushed changes, how."""
    return {n: s.live_api.push for n, s in registered_sources().items() if s.live_api and s.live_api.push}


def _secret(settings: ServeSettings, push: PushedChanges) -> str | None:
    value = getattr(settings, push.secret, None)
    return value.get_secret_value() if isinstance(value, SecretStr) else None


def push_variables() -> dict[str, str]:
    """Per source that can receive pushed changes, the variable holding its secret."""
    return {n: push.variable for n, push in _pushes().items()}


def wants_events(settings: ServeSettings) -> bool:
    """Whether any receiver is configured (the service then needs a launcher even without RAG_INGEST_TOKEN)."""
    return any(_secret(settings, push) for push in _pushes().values())


@dataclass
class EventReceivers:
    """The receivers that are on, and their shared deduplication and queue."""

    syncs: TargetedSyncs
    receivers: dict[str, PushReceiver] = field(default_factory=dict)
    seen: SeenDeliveries = field(default_factory=SeenDeliveries)

    def receiver(self, source: str) -> PushReceiver:
        """``source``'s receiver, or :class:`PushRefused` (404) naming the variable that turns it on."""
        found = self.receivers.get(source)
        if found is None:
            raise PushRefused(404, off_message(source), None)
        return found

    def receive(self, source: str, body: bytes, headers: Mapping[str, str], token: str | None) -> dict[str, Any]:
        """Verify a request of ``source``, deduplicate it and queue its syncs; the JSON answer."""
        change = self.receiver(source).read(body, headers, token)
        if change.reply is not None:
            return change.reply
        if change.delivery is not None and not self.seen.first_time(f"{source}\x00{change.delivery}"):
            return {"ok": True, "queued": 0, "duplicate": True}
        outcomes = [self.syncs.add(source, target, change.delivery or "-") for target in change.targets]
        return {"ok": True, "queued": sum(o in ("queued", "coalesced") for o in outcomes), "outcomes": outcomes}


def off_message(source: str) -> str:
    variable = push_variables().get(source)
    if variable is None:
        return f"no receiver of pushed changes for {source[:40]!r} (sources: {', '.join(push_variables())})"
    return f"{source} events are off: set {variable} on the service"


def build_event_receivers(settings: ServeSettings, launcher: IngestLauncher | None) -> EventReceivers | None:
    """The configured receivers over ``launcher``; None when none is configured."""
    if launcher is None or not wants_events(settings):
        return None
    receivers: dict[str, PushReceiver] = {}
    for name, push in _pushes().items():
        if secret := _secret(settings, push):
            receivers[name] = load_object(push.receiver)(secret)
    return EventReceivers(TargetedSyncs(launcher, debounce_seconds=settings.events_debounce_seconds), receivers)
