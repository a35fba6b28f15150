"""UTC days as partition keys (``YYYY-MM-DD``) and the epoch bounds of a day."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

DAY = 86400.0


def day_start(day: str) -> float:
    """Epoch seconds of a UTC day's midnight."""
    return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()


def day_of(seconds: float) -> str:
    """The UTC day of an epoch time."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d")


def days_between(start: str, end: str) -> list[str]:
    """Every UTC day from start to end inclusive (YYYY-MM-DD)."""
    first, last = date.fromisoformat(start), date.fromisoformat(end)
    if last < first:
        raise ValueError(f"end {end} is before start {start}")
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
