"""The reader kernel of the Atlassian connectors: what a Jira and a Confluence REST reader do alike.

Both read an Atlassian site through atlassian-python-api, one container (a project, a space) and a set of UTC days at
a time: every request is made under the container's :class:`~rag_pipeline.sources.paging.ReadBudget` and its failure
becomes one actionable error; the days become a query window written in the API user's time zone (JQL and CQL dates
have minute precision and are read in that zone), widened where the zone is unknown and filtered exactly afterwards;
and each item found keeps its newest version and goes to the day it changed on. :class:`AtlassianReader` holds that;
each connector's reader adds its own endpoints and documents.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import requests
from pydantic import BaseModel, Field

from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.days import day_of, day_start
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.identifiers import InvalidIdentifier, check_container_id, display_name
from rag_pipeline.sources.paging import DEFAULT_PAGE_CAP, PageGuard, ReadBudget, budgeted_call
from rag_pipeline.sources.problems import RecordProblem, SourceError

# Every real zone is within UTC-12..UTC+14: a window this much wider holds the day in any zone.
ZONE_PAD = timedelta(hours=14)
# The longest repeated wall-clock span of a DST change (one hour everywhere but Troll's two).
DST_PAD = timedelta(hours=2)

Item = TypeVar("Item")


class AtlassianSyncSettings(BaseModel):
    """What every Atlassian reader is told: Cloud or not, the site's name, the re-read overlap, archived
    containers, and the bounds on one container's read. Each connector's settings add their page sizes and
    filters."""

    cloud: bool = Field(True, description="Cloud (e-mail + API token) or Server/Data Center (personal access token)")
    site: str | None = Field(None, description="Site name in document ids and ACL groups (default: the URL's host)")
    overlap_minutes: int = Field(15, ge=0, description="Minutes before the first day re-read (eventual consistency)")
    include_archived: bool = Field(False, description="Discover archived containers too")
    page_cap: int = Field(DEFAULT_PAGE_CAP, ge=1, description="Pages per paged call (RAG_API_PAGE_CAP)")
    requests_per_partition: int | None = Field(
        5_000, ge=1, description="Requests a container's read may make per day it covers (None: unbounded)"
    )
    seconds_per_partition: float | None = Field(
        3_600, gt=0, description="Seconds a container's read may take per day it covers (None: unbounded)"
    )


Settings = TypeVar("Settings", bound=AtlassianSyncSettings)


@dataclass(frozen=True)
class ProductWords:
    """How a connector's messages name its product and what to change. ``name`` ("Jira") also names its variables
    (``JIRA_URL``...) and its Dagster pool (``jira_api``); ``container``: what it reads one at a time ("project");
    ``server``: its self-hosted edition ("Server/Data Center"); ``see``: what the API user must be able to do to a
    container ("browse"); ``grant``: the advice for a 403; ``context``: an example of the site URL's context path
    (for a whole site not found)."""

    name: str
    container: str
    server: str
    see: str
    grant: str
    context: str = ""

    @property
    def variables(self) -> str:
        return self.name.upper()

    @property
    def credentials(self) -> str:
        v = self.variables
        return f"check {v}_USERNAME and {v}_API_TOKEN (Cloud) or {v}_PAT ({self.server})"

    @property
    def site_hint(self) -> str:
        v = self.variables
        return f"check {v}_URL and its context path{self.context}, and set {v}_CLOUD=0 for {self.server}"


@dataclass
class ContainerRead:
    """What a read of one container (a project, a space) for a set of days found: its documents, the day each
    belongs to, what could not be read, and how many comment pages it took."""

    documents: list[Document] = field(default_factory=list)
    partition_day: dict[str, str] = field(default_factory=dict)
    problems: list[RecordProblem] = field(default_factory=list)
    comment_pages: int = 0


def _response(exc: BaseException) -> Any:
    """The HTTP response of a failed call: requests' errors carry it, the library's ApiError in its cause."""
    response = getattr(exc, "response", None)
    if response is None:
        response = getattr(getattr(exc, "reason", None), "response", None)
    return response


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a failed call (None when it got no answer)."""
    status = getattr(_response(exc), "status_code", None)
    return status if isinstance(status, int) else None


def describe_atlassian_error(
    exc: BaseException,
    what: str,
    where: str | None,
    words: ProductWords,
    endpoint_of: Callable[[str], str],
    special: Callable[[int | None, str, str, str], str | None] | None = None,
) -> str:
    """One actionable sentence for a failed call (never includes credentials). ``special(status, target, path,
    message)`` words a failure the product has its own advice for (None: the common words)."""
    name, target = words.name, where or "the site"
    if isinstance(exc, requests.exceptions.RetryError):
        return (
            f"{name} kept failing to {what} for {target} (rate limited or server errors) after every retry: lower "
            f"concurrency (pool {name.lower()}_api) or raise max_retries"
        )
    request = getattr(exc, "request", None)
    at = f" at {endpoint_of(request.path_url)}" if request is not None and request.path_url else ""
    if isinstance(exc, requests.exceptions.Timeout) or "timed out" in str(exc):
        return (
            f"{name} did not answer ({what}) for {target}{at} in time ({type(exc).__name__}: the connect/read timeout "
            "or the deadline per request, RAG_API_TIMEOUT_SECONDS, after every retry)"
        )
    if isinstance(exc, requests.exceptions.ConnectionError):
        return (
            f"{name} could not be reached to {what} for {target}{at} ({type(exc).__name__}): check "
            f"{words.variables}_URL and the network"
        )
    status, response = http_status(exc), _response(exc)
    sent = getattr(response, "request", None)
    path = urlsplit(sent.url).path if sent is not None and getattr(sent, "url", None) else ""
    message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    worded = special(status, target, path, message) if special is not None else None
    if worded is not None:
        return worded
    if status == 401:
        return f"{name} 401: the credentials were rejected: {words.credentials}"
    if status == 403:
        return f"{name} 403: the API user may not {what} on {target} ({message}): {words.grant}"
    if status == 404:
        found_at = f" at {path}" if path else ""
        return (
            f"{name} 404: {target} was not found{found_at}: it does not exist or the API user cannot {words.see} it "
            f"(for a whole site: {words.site_hint})"
        )
    return f"{name} {status or type(exc).__name__}: {what} failed for {target}: {message}"


def zone_named(profile: object) -> ZoneInfo | None:
    """The time zone a user profile names in ``timeZone`` (None: none, or one this machine does not know)."""
    name = profile.get("timeZone") if isinstance(profile, dict) else None
    try:
        return ZoneInfo(name) if isinstance(name, str) and name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _wall_clock(instant: datetime, zone: ZoneInfo | None, widen: timedelta, fmt: str) -> str:
    """``instant`` as the user's wall clock; a wall clock that occurs twice (clocks going back) is moved by
    ``widen`` so either reading the server picks still covers the instant."""
    clock = zone or UTC
    wall = instant.astimezone(clock).replace(tzinfo=None)
    if len({wall.replace(tzinfo=clock, fold=fold).utcoffset() for fold in (0, 1)}) > 1:
        wall += widen
    return wall.strftime(fmt)


def query_bounds(start: datetime, end: datetime, zone: ZoneInfo | None, fmt: str) -> tuple[str, str]:
    """[start, end) as a query's wall-clock bounds in ``zone`` (``fmt``: minutes at most): the start floored and
    the end ceiled to whole minutes, both widened by 14 hours when the zone is unknown (None); the caller filters
    the instants it gets exactly."""
    if zone is None:
        start, end = start - ZONE_PAD, end + ZONE_PAD
    end_ceiled = end + timedelta(minutes=1) if end.second or end.microsecond else end
    return _wall_clock(start, zone, -DST_PAD, fmt), _wall_clock(end_ceiled, zone, DST_PAD, fmt)


@dataclass(frozen=True)
class DayWindow:
    """The UTC days (YYYY-MM-DD, sorted) a read covers and the instants it asks for: from ``overlap_minutes``
    before the first day (search is eventually consistent; a change found there goes to the first day) to the
    end of the last."""

    days: tuple[str, ...]
    start: datetime
    end: datetime

    @classmethod
    def covering(cls, days: Iterable[str], overlap_minutes: int) -> DayWindow | None:
        """The window of ``days`` (None when there are none)."""
        wanted = tuple(sorted(set(days)))
        if not wanted:
            return None
        first = datetime.fromtimestamp(day_start(wanted[0]), tz=UTC)
        end = datetime.fromtimestamp(day_start(wanted[-1]), tz=UTC) + timedelta(days=1)
        return cls(wanted, first - timedelta(minutes=overlap_minutes), end)

    def holds(self, instant: datetime) -> bool:
        return self.start <= instant < self.end

    def day_of(self, instant: datetime) -> str | None:
        """The day a change at ``instant`` belongs to: its own day when read, the first day for the overlap before
        it, None for a day between the ones read."""
        day = day_of(instant.timestamp())
        if day in self._day_set:
            return day
        return self.days[0] if day < self.days[0] else None

    @cached_property
    def _day_set(self) -> frozenset[str]:
        return frozenset(self.days)


class NewestVersions(Generic[Item]):
    """The newest version of each item a window's read found (pages ordered by modification can repeat an item
    changed while paging; ties keep the later one), and the day each belongs to."""

    def __init__(self, window: DayWindow) -> None:
        self.window = window
        self._latest: dict[str, tuple[datetime, Item]] = {}

    def offer(self, item_id: str, updated: datetime, item: Item) -> None:
        """Keep ``item`` when it changed inside the window and is not older than the version kept."""
        if not self.window.holds(updated):
            return
        previous = self._latest.get(item_id)
        if previous is None or previous[0] <= updated:
            self._latest[item_id] = (updated, item)

    def by_day(self) -> Iterator[tuple[str, Item]]:
        """(day, item) of every item kept that belongs to a day read."""
        for updated, item in self._latest.values():
            day = self.window.day_of(updated)
            if day is not None:
                yield day, item


class AtlassianReader(Generic[Settings]):
    """What a Jira and a Confluence reader share: the client and its call statistics, the site's name, calls with
    one error type per connector, and the read budget of the container being read. One instance per run."""

    words: ClassVar[ProductWords]
    access_error: ClassVar[type[SourceError]]
    timeout_error: ClassVar[type[SourceError]]
    # What a failed call raises: requests' errors, and for clients whose library wraps them, its own.
    transport_errors: ClassVar[tuple[type[Exception], ...]] = (requests.exceptions.RequestException,)

    def __init__(self, client: Any, settings: Settings, log: Callable[[str], None] | None) -> None:
        self.client = client
        self.settings = settings
        self._log = log or (lambda _msg: None)
        # The budget of the container being read (None outside a budgeted read): every request spends from it.
        self._budget: ReadBudget | None = None

    @property
    def stats(self) -> ApiStats:
        """Calls and retries so far (a client not built by the connector's builder counts nothing)."""
        stats = getattr(self.client, "stats", None)
        return stats if isinstance(stats, ApiStats) else ApiStats()

    @property
    def base_url(self) -> str:
        return str(self.client.url).rstrip("/")

    @property
    def site(self) -> str:
        return self.settings.site or urlsplit(self.base_url).netloc

    def describe_error(self, exc: Exception, what: str, where: str | None) -> str:
        """One actionable sentence for a failed call (the connector adds its own special cases)."""
        raise NotImplementedError

    def _call(
        self, what: str, where: str | None, fn: Callable[..., Any], *args: Any, missing_ok: bool = False, **kwargs: Any
    ) -> Any:
        """``fn(*args, **kwargs)`` (one HTTP request) with failures as one access error (a timeout error where no
        complete answer came); ``missing_ok``: None on 404. Inside a budgeted read the request, and the retries it
        needed, are spent from the budget first."""
        try:
            return budgeted_call(self._budget, lambda: self.stats.total_retries, lambda: fn(*args, **kwargs))
        except self.transport_errors as exc:
            if missing_ok and http_status(exc) == 404:
                return None
            message = self.describe_error(exc, what, where)
            raise (self.timeout_error if "did not answer" in message else self.access_error)(message) from None

    @contextmanager
    def _budgeted(self, container: str, days: int) -> Iterator[None]:
        """Spend every request made inside from one container's :class:`ReadBudget` (per day covered)."""
        s = self.settings
        where = f"{self.words.name} {self.words.container} {container}"
        self._budget = ReadBudget.per_day(where, days, s.requests_per_partition, s.seconds_per_partition)
        try:
            yield
        finally:
            self._budget = None

    @property
    def rest_root(self) -> str:
        """The path REST resources are under (what a page guard names)."""
        return "/rest/api"

    def _guard(self, resource: str, where: str | None) -> PageGuard:
        # Atlassian never pads a listing with empty pages that promise more (no post-filtering, unlike Slack): one
        # is already a broken server, so max_empty_pages is 0.
        endpoint = f"{self.rest_root}/{resource}"
        return PageGuard(endpoint, where, page_cap=self.settings.page_cap, max_empty_pages=0)

    def _listed(
        self, raw: dict[str, Any], number: int, max_name: int, problems: list[RecordProblem]
    ) -> tuple[str, str] | None:
        """A discovery listing's container key and name (the key where it has none), or None (and a problem) when
        the key cannot be a partition key."""
        name = display_name(raw.get("name"), "", max_name)
        label = f"{self.words.name} {self.words.container}"
        try:
            key = check_container_id(raw.get("key"), f"{label} key of {name or '?'!r}")
        except InvalidIdentifier as exc:
            problems.append(RecordProblem(f"{label.lower()} listing entry {number}", str(exc)))
            return None
        return key, name or key
