"""A per-person request budget for the search service (``RAG_SERVE_RATE_PER_MINUTE``): at most N requests in any
60 seconds per caller identity, so one agent in a loop cannot take every slot that admission control leaves.

A sliding window of request times per identity (the person's email or account id as the request names it after
sign-in), kept in memory: one service process, one event loop, so no lock. Identities idle for a window are
dropped, so memory follows the active callers.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

WINDOW_SECONDS = 60.0


class PersonRateLimit:
    """``allow(identity)`` is 0 when the request may run, else the seconds until it may (for Retry-After)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute < 1:
            raise ValueError("RAG_SERVE_RATE_PER_MINUTE must be at least 1")
        self.per_minute = per_minute
        self._clock = clock
        self._recent: dict[str, deque[float]] = {}

    def allow(self, identity: str) -> int:
        now = self._clock()
        recent = self._recent.setdefault(identity, deque())
        while recent and recent[0] <= now - WINDOW_SECONDS:
            recent.popleft()
        if len(recent) >= self.per_minute:
            return max(1, math.ceil(recent[0] + WINDOW_SECONDS - now))
        recent.append(now)
        if len(self._recent) > 10_000:  # drop the idle ones now and then
            self._recent = {k: v for k, v in self._recent.items() if v and v[-1] > now - WINDOW_SECONDS}
        return 0
