"""The one document shape every source produces: a Slack thread or a Jira issue."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Metadata keys of a document family (a Jira issue and its restricted comments, each its own document): the head
# lists its members, each member names its head. The pipeline writes them into the index payload (stages.py).
BELONGS_TO = "belongs_to"
FAMILY = "family"


class Acl(BaseModel):
    """Who may read a document. Access is granted by any match: public, a user or a group; and where
    ``restricted_to`` is given (a Jira comment restricted to a role or group), only to a reader who also holds one
    of its groups: the intersection of the issue's readers and the comment's."""

    model_config = ConfigDict(frozen=True)

    public: bool = False
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    # Left out of the payload when empty, so every unrestricted document's ACL stays as it was written before.
    restricted_to: tuple[str, ...] = Field(default=(), exclude_if=lambda value: not value)

    def admits(self, user_id: str | None, groups: frozenset[str] | set[str] = frozenset()) -> bool:
        """True when a principal (user id + groups) may read the document."""
        if self.restricted_to and not set(self.restricted_to) & set(groups):
            return False
        return self.public or (user_id is not None and user_id in self.users) or bool(set(self.groups) & set(groups))


class Document(BaseModel):
    """A source document with identity, version and access control.

    ``version`` is the source's own notion of "newest change" as epoch seconds, so versions of
    Slack threads (message ts) and Jira issues (``fields.updated``) compare the same way.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    source: str
    container: str
    title: str
    text: str
    url: str | None = None
    authors: tuple[str, ...] = ()
    created: datetime
    updated: datetime
    version: float
    content_hash: str
    acl: Acl
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def day(self) -> str:
        """The UTC day (YYYY-MM-DD) of the document's latest activity: its partition date."""
        return self.updated.astimezone(UTC).strftime("%Y-%m-%d")

    def to_record(self) -> dict[str, Any]:
        """A flat, parquet-friendly row (nested values as JSON strings)."""
        return {
            "document_id": self.id,
            "source": self.source,
            "container": self.container,
            "title": self.title,
            "text": self.text,
            "url": self.url,
            "authors": json.dumps(list(self.authors)),
            "created": self.created.isoformat(),
            "updated": self.updated.isoformat(),
            "version": self.version,
            "content_hash": self.content_hash,
            "acl": self.acl.model_dump_json(),
            "metadata": json.dumps(self.metadata, sort_keys=True, default=str),
        }


DOCUMENT_COLUMNS: tuple[str, ...] = (
    "document_id",
    "source",
    "container",
    "title",
    "text",
    "url",
    "authors",
    "created",
    "updated",
    "version",
    "content_hash",
    "acl",
    "metadata",
)


def content_hash(text: str) -> str:
    """sha256 of the cleaned text: unchanged text means unchanged chunks and embeddings."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# The last second a UTC datetime can hold (9999-12-31T23:59:59Z): later epoch values cannot be a day.
MAX_EPOCH_SECONDS = 253_402_300_799.0


def epoch_to_datetime(seconds: float) -> datetime:
    """UTC datetime from epoch seconds; ValueError for times no partition day can hold (negative, infinite,
    past year 9999), which ``datetime`` would answer with an OverflowError or OSError instead."""
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_EPOCH_SECONDS:
        raise ValueError(f"time {seconds!r} is outside 1970-01-01..9999-12-31 (epoch seconds)")
    return datetime.fromtimestamp(seconds, tz=UTC)


def utc_instant(value: datetime) -> datetime:
    """A timezone-aware time in UTC; ValueError when it has no zone or falls outside what UTC can show
    (``0001-01-01T00:00:00+0100`` would overflow later, when its day is taken)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"time without a timezone: {value.isoformat()}")
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError(f"time {value.isoformat()} is outside what UTC can show") from exc


def truncated(document: Document, max_chars: int) -> Document | None:
    """The document with its text cut to ``max_chars`` characters (and its hash redone), or None when it
    fits. One 5 MB message would otherwise become ~12,000 chunks; what is kept is the start of the thread
    or issue, where the question usually is. ``metadata.truncated_from_chars`` records the full length."""
    if len(document.text) <= max_chars:
        return None
    text = document.text[:max_chars].rstrip()
    return document.model_copy(
        update={
            "text": text,
            "content_hash": content_hash(text),
            "metadata": {**document.metadata, "truncated_from_chars": len(document.text)},
        }
    )
