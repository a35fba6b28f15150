"""Dates and times a search filters on, read the same way everywhere (CLI flags, API fields, tool arguments)."""

from __future__ import annotations

from datetime import UTC, datetime


class NotAnInstant(ValueError):
    """The text is no ISO date or date-time, or it has no UTC time (year 1 with a zone east of UTC)."""


def utc_instant(value: str) -> str:
    """A day (``YYYY-MM-DD``, midnight UTC) or an ISO 8601 date-time (UTC when it names no zone), as the
    RFC 3339 text both index engines parse (``2024-05-01T00:00:00+00:00``)."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise NotAnInstant(
            "must be a date (YYYY-MM-DD) or an ISO 8601 date-time (YYYY-MM-DDTHH:MM:SS, optionally with a zone), "
            f"got {value!r}"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC).isoformat()
    except OverflowError:  # 0001-01-01T00:00+01:00 has no UTC time
        raise NotAnInstant(f"is outside the dates a UTC time can show, got {value!r}") from None
