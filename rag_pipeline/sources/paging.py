"""Guards that keep a paged API read bounded whatever the server answers.

A server with a cursor bug, a proxy that caches one page, or a Server/Data Center ``startAt`` that is
ignored makes a naive ``while has_more`` loop request forever (measured against the emulators: 67,000
Slack and 38,000 Jira requests in 90 s) and burns the app's rate-limit allowance for the whole workspace.
Every paged call goes through one :class:`PageGuard`, and every container read through one
:class:`ReadBudget`; a tripped guard is a :class:`GuardTripped` error naming the endpoint, the container,
the cursor and which guard stopped it, so the container fails alone and is read again next time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import TypeVar

from rag_pipeline.sources.problems import SourceError

# Pages per paged call: 10,000 pages of 200 messages is 2 million messages in one channel-range read,
# or 1 million Jira issues at 100 per page; no real read comes near it.
DEFAULT_PAGE_CAP = 10_000
T = TypeVar("T")
# Consecutive pages that hold nothing but promise more. Slack may return a short (even empty) page with a
# cursor when filters drop items, so a few are normal; an endless run of them is a broken server.
DEFAULT_MAX_EMPTY_PAGES = 50


class GuardTripped(SourceError):
    """A paged read or a container's read stopped by a guard; ``guard`` names which one."""

    def __init__(self, message: str, guard: str) -> None:
        super().__init__(message)
        self.guard = guard


class PageGuard:
    """Watches one paged call's cursors (page tokens, ``startAt`` offsets) and stops it when it cannot end."""

    def __init__(
        self,
        endpoint: str,
        where: str | None = None,
        page_cap: int = DEFAULT_PAGE_CAP,
        max_empty_pages: int = DEFAULT_MAX_EMPTY_PAGES,
    ) -> None:
        self.endpoint = endpoint
        self.where = where
        self.page_cap = page_cap
        self.max_empty_pages = max_empty_pages
        self.pages = 0
        self._seen: set[Hashable] = set()
        self._empty_run = 0

    def _trip(self, what: str, guard: str) -> GuardTripped:
        place = f" for {self.where}" if self.where else ""
        return GuardTripped(f"{self.endpoint}{place} stopped after {self.pages} pages: {what}", guard)

    def page(self, items: int, next_cursor: Hashable | None) -> None:
        """Record one page (its item count and the cursor it hands out; None when it is the last) before the
        next request; raises :class:`GuardTripped` when the next request cannot make progress."""
        self.pages += 1
        if next_cursor is None:
            return
        if next_cursor in self._seen:
            raise self._trip(f"the server repeated the cursor {str(next_cursor)[:60]!r}", "repeated_cursor")
        self._seen.add(next_cursor)
        self._empty_run = self._empty_run + 1 if items == 0 else 0
        if self._empty_run > self.max_empty_pages:
            raise self._trip(f"{self._empty_run} empty pages in a row that promised more", "empty_pages")
        if self.pages >= self.page_cap:
            raise self._trip(f"the page cap of {self.page_cap} was reached (RAG_API_PAGE_CAP)", "page_cap")

    def offset(self, items: int, start: int, next_start: int) -> None:
        """Record one offset-paged page: ``next_start`` must move past ``start``."""
        if next_start <= start:
            raise self._trip(f"startAt did not advance ({start} -> {next_start}): the server ignores it", "offset")
        self.page(items, next_start)


class ReadBudget:
    """Requests and wall-clock seconds one container's read may spend; exceeding either stops the read."""

    def __init__(self, where: str, max_requests: int | None, max_seconds: float | None) -> None:
        self.where = where
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.requests = 0
        self._started = time.monotonic()

    @classmethod
    def per_day(cls, where: str, days: int, requests_per_day: int | None, seconds_per_day: float | None) -> ReadBudget:
        """The budget of a read covering ``days`` days at so many requests and seconds a day (None: unbounded)."""
        return cls(
            where,
            requests_per_day * days if requests_per_day else None,
            seconds_per_day * days if seconds_per_day else None,
        )

    @property
    def seconds(self) -> float:
        return time.monotonic() - self._started

    def spend(self, requests: int = 1) -> None:
        """Count requests about to be made; raises :class:`GuardTripped` past either budget."""
        self.requests += requests
        if self.max_requests is not None and self.requests > self.max_requests:
            raise GuardTripped(
                f"reading {self.where} needed more than {self.max_requests} requests "
                "(RAG_API_REQUEST_BUDGET per partition); it stays unsynced and is read again next time",
                "request_budget",
            )
        if self.max_seconds is not None and self.seconds > self.max_seconds:
            raise GuardTripped(
                f"reading {self.where} took more than {self.max_seconds:.0f} s "
                "(RAG_API_SECONDS_BUDGET per partition); it stays unsynced and is read again next time",
                "time_budget",
            )


def budgeted_call(budget: ReadBudget | None, retries: Callable[[], int], call: Callable[[], T]) -> T:
    """``call()`` (one request), spent from ``budget`` when a read runs under one; once it answered, the retries
    it needed (``retries()`` counts them all) are spent too: they are requests the server saw, and the next spend
    stops a read past the budget, while a call that already succeeded is not thrown away."""
    if budget is not None:
        budget.spend()
    before = retries()
    result = call()
    if budget is not None:
        budget.requests += retries() - before
    return result
