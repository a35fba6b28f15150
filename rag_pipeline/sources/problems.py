"""Bad input records: reported with their location, never allowed to sink the rest of a read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecordProblem:
    """One record that could not be read, and why (``location`` names the file/line/record)."""

    location: str
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


class SourceError(ValueError):
    """The source as a whole is unusable (missing folder, unreadable manifest...)."""
