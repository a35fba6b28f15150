"""Counts of a live connector's API calls and retries, for run metadata and benchmarks."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ApiStats:
    """Calls per API method or endpoint, and retries by kind (rate limits, server errors, connections)."""

    calls: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)

    @property
    def api_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_retries(self) -> int:
        return sum(self.retries.values())

    def as_metadata(self) -> dict[str, object]:
        """The counts as run metadata."""
        return {
            "api_calls": self.api_calls,
            "api_retries": self.total_retries,
            "api_calls_by_method": dict(sorted(self.calls.items())),
            "api_retries_by_kind": dict(sorted(self.retries.items())),
        }
