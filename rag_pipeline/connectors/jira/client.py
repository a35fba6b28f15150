"""The Jira HTTP client: atlassian-python-api's ``Jira`` with counted retries and a deadline per attempt.

requests' ``timeout`` bounds each socket read, so a server that trickles one byte a second would hold a run
forever; here every attempt must be answered in full within the deadline, retries are counted by kind, and
calls are counted per endpoint (ids and keys replaced) for the run's metadata.
"""

from __future__ import annotations

import re

from atlassian import Jira

from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.http_client import RETRY_STATUSES, atlassian_auth, counted_transport, endpoint_name

_PATH_IDS = [
    (re.compile(r"/issue/[^/]+"), "/issue/{issue}"),
    (re.compile(r"/project/(?!search\b)[^/]+"), "/project/{project}"),
    (re.compile(r"/role/\d+"), "/role/{id}"),
    (re.compile(r"/permissionscheme/\d+"), "/permissionscheme/{id}"),
]


def endpoint_of(path: str) -> str:
    """A request path with issue keys and ids replaced, for counting calls per endpoint."""
    return endpoint_name(path, _PATH_IDS)


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
    missing = "Jira credentials missing: set JIRA_USERNAME and JIRA_API_TOKEN (Cloud) or JIRA_PAT (Server/Data Center)"
    auth = atlassian_auth(username, api_token, personal_access_token, cloud, missing)
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
    counted_transport(client.session, client.url, stats, endpoint_of, max_retries, backoff_seconds, timeout)
    client.stats = stats  # type: ignore[attr-defined]
    return client
