"""The reader kernel of the Atlassian connectors: what a Jira and a Confluence REST reader do alike (what a read
covers and finds: :mod:`~rag_pipeline.connectors.atlassian.reads`).

Both read an Atlassian site through atlassian-python-api, one container (a project, a space) and a set of UTC days at
a time: every request is made under the container's :class:`~rag_pipeline.sources.paging.ReadBudget` and its failure
becomes one actionable error; the days become a query window written in the API user's time zone (JQL and CQL dates
have minute precision and are read in that zone), widened where the zone is unknown and filtered exactly afterwards;
and each item found keeps its newest version and goes to the day it changed on. :class:`AtlassianReader` holds that;
each connector's reader adds its own endpoints and documents.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import requests
from pydantic import BaseModel, Field

from rag_pipeline.connectors.atlassian.reads import ListedContainer, query_bounds
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.identifiers import InvalidIdentifier, check_container_id, display_name
from rag_pipeline.sources.paging import DEFAULT_PAGE_CAP, PageGuard, ReadBudget, budgeted_call
from rag_pipeline.sources.problems import RecordProblem, SourceError
from rag_pipeline.sources.selection import kept


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

    def _wanted(self, container: ListedContainer, allow: Sequence[str], deny: Sequence[str]) -> bool:
        """Whether discovery keeps a listed container: not archived unless asked for, then the allow/deny filters
        (deny wins over allow)."""
        if container.archived and not self.include_archived:
            return False
        return kept(container.key, allow, deny)


SyncSettings = TypeVar("SyncSettings", bound=AtlassianSyncSettings)


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
    def prefix(self) -> str:
        """What its environment variables start with (``JIRA``)."""
        return self.name.upper()

    @property
    def credentials(self) -> str:
        v = self.prefix
        return f"check {v}_USERNAME and {v}_API_TOKEN (Cloud) or {v}_PAT ({self.server})"

    @property
    def site_hint(self) -> str:
        v = self.prefix
        return f"check {v}_URL and its context path{self.context}, and set {v}_CLOUD=0 for {self.server}"


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
            f"{words.prefix}_URL and the network"
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


class AtlassianReader(ABC, Generic[SyncSettings]):
    """What a Jira and a Confluence reader share: the client and its call statistics, the site's name, calls with
    one error type per connector, and the read budget of the container being read. One instance per run."""

    words: ClassVar[ProductWords]
    access_error: ClassVar[type[SourceError]]
    timeout_error: ClassVar[type[SourceError]]
    # The query language's date format (minute precision, in the API user's zone).
    query_time: ClassVar[str]
    # What a failed call raises: requests' errors, and for clients whose library wraps them, its own.
    transport_errors: ClassVar[tuple[type[Exception], ...]] = (requests.exceptions.RequestException,)

    def __init__(self, client: Any, settings: SyncSettings, log: Callable[[str], None] | None = None) -> None:
        self.client = client
        self.settings = settings
        self._log = log or (lambda _msg: None)
        # The budget of the container being read (None outside a budgeted read): every request spends from it.
        self._budget: ReadBudget | None = None
        self._start_caches()

    def _start_caches(self) -> None:
        """Set up what the product's reader caches for this run (its instance's lifetime); none by default."""

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
        """One actionable sentence for a failed call (never includes credentials)."""
        return describe_atlassian_error(exc, what, where, self.words, self.endpoint_of, self.special_error)

    @abstractmethod
    def endpoint_of(self, path: str) -> str:
        """A request path's endpoint (ids and keys replaced), as error messages name it."""

    def special_error(self, status: int | None, target: str, path: str, message: str) -> str | None:
        """The connector's own words for a failure (None: the common ones); see :func:`describe_atlassian_error`."""
        return None

    @abstractmethod
    def _profile(self) -> Any:
        """The API user's profile (its ``timeZone``); None where it cannot be read and that is no failure."""

    @cached_property
    def user_zone(self) -> ZoneInfo | None:
        """The API user's time zone, in which the query language reads dates (None: unknown)."""
        return zone_named(self._profile())

    def _query_bounds(self, start: datetime, end: datetime) -> tuple[str, str]:
        """[start, end) as the query language's wall-clock bounds in the API user's zone (:func:`query_bounds`)."""
        return query_bounds(start, end, self.user_zone, self.query_time)

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
