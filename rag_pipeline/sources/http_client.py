"""The source-neutral HTTP transport policy of the REST connectors (Jira, Confluence): retries counted by kind
(429 with Retry-After, 5xx, dropped connections) and a deadline per attempt.

requests' ``timeout`` bounds each socket read, so a server that trickles one byte a second would hold a run
forever; here every attempt must be answered in full within the deadline. Measured on the Jira client first
(docs/notes/slack_jira_clients.md).
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import MaxRetryError, ReadTimeoutError
from urllib3.util import Retry

from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.problems import SourceError

RETRY_STATUSES = (429, 500, 502, 503, 504)
MAX_RETRY_AFTER_SECONDS = 300

# Retries of a request that timed out (no complete answer within the timeout or the deadline).
MAX_TIMEOUT_RETRIES = 1


class CountedRetry(Retry):
    """urllib3's Retry, counting each retry it grants by kind."""

    stats: ApiStats | None = None
    timeouts = 0

    def new(self, **kw: Any) -> CountedRetry:
        retry = super().new(**kw)
        retry.stats, retry.timeouts = self.stats, self.timeouts
        return retry

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: Any = None,
    ) -> CountedRetry:
        # A silent or trickling server costs a full timeout per attempt: one retry covers a passing stall, more
        # would hold the run for (retries + 1) x the timeout. Dropped connections keep the full budget.
        timed_out = isinstance(error, ReadTimeoutError) or _ATTEMPT.expired
        if timed_out and self.timeouts >= MAX_TIMEOUT_RETRIES:
            raise MaxRetryError(_pool, url or "", error)
        retry = super().increment(method, url, response=response, error=error, _pool=_pool, _stacktrace=_stacktrace)
        retry.timeouts = self.timeouts + int(timed_out)
        if self.stats is not None:
            kind = f"http_{response.status}" if response is not None and error is None else "connection"
            self.stats.retries[kind] += 1
        return retry


class _Attempt(threading.local):
    """The HTTP attempt the current thread is making (one per urllib3 retry), for :class:`DeadlineAdapter`."""

    number = 0
    connection: Any = None
    expired = False


_ATTEMPT = _Attempt()


def _start_attempt(connection: Any, deadline: float) -> threading.Timer:
    """Mark a new attempt on ``connection`` and arm its deadline: past it the socket is shut down, which ends a
    blocked read at once (a timer left over from an earlier attempt finds a newer number and does nothing)."""
    _ATTEMPT.number += 1
    _ATTEMPT.connection, _ATTEMPT.expired = connection, False
    state, number = _ATTEMPT.__dict__, _ATTEMPT.number

    def expire() -> None:
        if state.get("number") != number:
            return
        state["expired"] = True
        sock = getattr(connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(deadline, expire)
    timer.daemon = True
    timer.start()
    return timer


class _Deadline:
    """Mixed into a urllib3 connection pool (before it): every request attempt starts a fresh ``deadline`` timer."""

    deadline: float = 30.0

    def _make_request(self, conn: Any, *args: Any, **kwargs: Any) -> Any:
        _cancel_timer()
        _TIMERS.timer = _start_attempt(conn, self.deadline)
        return super()._make_request(conn, *args, **kwargs)  # type: ignore[misc]


class _DeadlinePool(_Deadline, HTTPConnectionPool):
    pass


class _DeadlineHTTPSPool(_Deadline, HTTPSConnectionPool):
    pass


class _Timers(threading.local):
    timer: threading.Timer | None = None


_TIMERS = _Timers()


def _cancel_timer() -> None:
    if _TIMERS.timer is not None:
        _TIMERS.timer.cancel()
        _TIMERS.timer = None


class DeadlineAdapter(HTTPAdapter):
    """An adapter whose every attempt must be answered in full within ``deadline`` seconds.

    requests' ``timeout`` bounds each socket read, so a server that sends one byte per second never trips it and
    holds the run forever (measured against the emulator). Each attempt arms a timer that shuts the socket down
    at the deadline; the read then fails, the retry policy decides as for any read error, and a request that
    ends that way is a :class:`requests.exceptions.ReadTimeout`. The body is read here, inside the deadline.
    """

    def __init__(self, deadline: float, **kwargs: Any) -> None:
        self.deadline = deadline
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        http = type("_Pool", (_DeadlinePool,), {"deadline": self.deadline})
        https = type("_HTTPSPool", (_DeadlineHTTPSPool,), {"deadline": self.deadline})
        self.poolmanager.pool_classes_by_scheme = {"http": http, "https": https}

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        _ATTEMPT.expired = False
        try:
            response = super().send(request, *args, **kwargs)
            if not kwargs.get("stream"):
                _ = response.content
            return response
        except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            if _ATTEMPT.expired:
                raise requests.exceptions.ReadTimeout(
                    f"no complete answer within {self.deadline:g} s", request=request
                ) from exc
            raise
        finally:
            _cancel_timer()


def atlassian_auth(
    username: str | None, api_token: str | None, personal_access_token: str | None, cloud: bool, missing: str
) -> dict[str, Any]:
    """atlassian-python-api's credentials: Cloud takes e-mail + API token (Basic) and rejects Bearer PATs; Server and
    Data Center prefer the PAT. ``missing`` is the SourceError's message when neither is given (it names the
    variables)."""
    if username and api_token and (cloud or not personal_access_token):
        return {"username": username, "password": api_token}
    if personal_access_token:
        return {"token": personal_access_token}
    raise SourceError(missing)


def counted_transport(
    session: requests.Session,
    url: str,
    stats: ApiStats,
    endpoint_of: Callable[[str], str],
    max_retries: int,
    backoff_seconds: float,
    timeout: int,
) -> None:
    """Mount the counted retries and the per-attempt deadline on ``session`` for ``url``, and count every response
    per endpoint (``endpoint_of`` replaces ids and keys in a path) into ``stats``."""
    retry = CountedRetry(
        total=None,
        # A wrong site URL (refused, unknown host) should fail fast; dropped responses get the full budget.
        connect=min(max_retries, 2),
        read=max_retries,
        status=max_retries,
        other=0,
        allowed_methods=None,
        status_forcelist=RETRY_STATUSES,
        backoff_factor=backoff_seconds,
        backoff_jitter=backoff_seconds,
        backoff_max=120,
        respect_retry_after_header=True,
        # One huge Retry-After must not hold the source's API pool for hours.
        retry_after_max=MAX_RETRY_AFTER_SECONDS,
    )
    retry.stats = stats
    session.mount(url, DeadlineAdapter(float(timeout), max_retries=retry))

    def count(response: requests.Response, *_args: Any, **_kwargs: Any) -> None:
        stats.calls[f"{response.request.method} {endpoint_of(response.request.path_url or '')}"] += 1

    session.hooks["response"].append(count)


def endpoint_name(path: str, path_ids: Sequence[tuple[re.Pattern[str], str]]) -> str:
    """A request path (query dropped) with ids and keys replaced by ``path_ids`` (pattern, placeholder), so calls
    count per endpoint rather than per issue or page."""
    path = urlsplit(path).path
    for pattern, replacement in path_ids:
        path = pattern.sub(replacement, path)
    return path
