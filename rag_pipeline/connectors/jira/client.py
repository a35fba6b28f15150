"""The Jira HTTP client: atlassian-python-api's ``Jira`` with counted retries and a deadline per attempt.

requests' ``timeout`` bounds each socket read, so a server that trickles one byte a second would hold a run
forever; here every attempt must be answered in full within the deadline, retries are counted by kind, and
calls are counted per endpoint (ids and keys replaced) for the run's metadata.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import requests
from atlassian import Jira

from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.http_client import (
    MAX_RETRY_AFTER_SECONDS,
    RETRY_STATUSES,
    CountedRetry,
    DeadlineAdapter,
)
from rag_pipeline.sources.problems import SourceError

_PATH_IDS = [
    (re.compile(r"/issue/[^/]+"), "/issue/{issue}"),
    (re.compile(r"/project/(?!search\b)[^/]+"), "/project/{project}"),
    (re.compile(r"/role/\d+"), "/role/{id}"),
    (re.compile(r"/permissionscheme/\d+"), "/permissionscheme/{id}"),
]


def endpoint_of(path: str) -> str:
    """A request path with issue keys and ids replaced, for counting calls per endpoint."""
    path = urlsplit(path).path
    for pattern, replacement in _PATH_IDS:
        path = pattern.sub(replacement, path)
    return path


def build_jira_client(
    url: str,
    *,
    username: str | None = None,
    api_token: str | None = None,
    personal_access_token: str | None = None,
    cloud: bool = True,
    stats: ApiStats | None = None,
    max_retries: int = 8,
    backoff_seconds: float = 1.0,
    timeout: int = 30,
) -> Jira:
    """An atlassian-python-api ``Jira`` client with counted retries.

    Cloud uses e-mail + API token (Basic) and REST v3 (ADF bodies); Server/Data Center uses a
    personal access token (Bearer) or user + password, and REST v2 (wiki bodies). The library's
    ``backoff_and_retry`` mounts urllib3 retries for 429/503 honouring Retry-After; they are
    replaced by the same policy widened to 500/502/504 and dropped connections, and counted.
    """
    # Cloud takes e-mail + API token (Basic) and rejects Bearer PATs; Server/DC prefers the PAT.
    if username and api_token and (cloud or not personal_access_token):
        auth: dict[str, Any] = {"username": username, "password": api_token}
    elif personal_access_token:
        auth = {"token": personal_access_token}
    else:
        raise SourceError(
            "Jira credentials missing: set JIRA_USERNAME and JIRA_API_TOKEN (Cloud) or JIRA_PAT (Server/Data Center)"
        )
    stats = stats if stats is not None else ApiStats()
    client = Jira(
        url=url,
        cloud=cloud,
        api_version="3" if cloud else "2",
        timeout=timeout,
        backoff_and_retry=True,
        retry_status_codes=list(RETRY_STATUSES),
        max_backoff_retries=max_retries,
        backoff_factor=backoff_seconds,
        **auth,
    )
    retry = CountedRetry(
        total=None,
        # A wrong JIRA_URL (refused, unknown host) should fail fast; dropped responses get the full budget.
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
        # One huge Retry-After must not hold the jira_api pool for hours.
        retry_after_max=MAX_RETRY_AFTER_SECONDS,
    )
    retry.stats = stats
    client.session.mount(client.url, DeadlineAdapter(float(timeout), max_retries=retry))
    client.session.hooks["response"].append(lambda response, *_a, **_k: _count(stats, response))
    client.stats = stats  # type: ignore[attr-defined]
    return client


def _count(stats: ApiStats, response: requests.Response) -> None:
    stats.calls[f"{response.request.method} {endpoint_of(response.request.path_url)}"] += 1
