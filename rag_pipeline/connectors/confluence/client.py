"""The Confluence HTTP client: atlassian-python-api's ``Confluence`` (REST v1) with counted retries and a deadline
per attempt, the same transport policy as the Jira client.

REST v1 for Cloud too: the 5.x library's Cloud class speaks REST v2, which has no CQL search returning storage
bodies, ancestors and read restrictions in one call; Cloud still serves v1 content search, content, restrictions,
space and group endpoints under ``/wiki/rest/api``. Cloud sites are therefore given the v1 client with their
``/wiki`` context path.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from atlassian import Confluence

from rag_pipeline.sources.api_stats import ApiStats

# The retry and deadline policy is source-neutral (measured on the Jira client first): the kernel's.
from rag_pipeline.sources.http_client import RETRY_STATUSES, atlassian_auth, counted_transport, endpoint_name

_PATH_IDS = [
    (re.compile(r"/content/(?!search\b)[^/]+"), "/content/{id}"),
    (re.compile(r"/space/[^/]+"), "/space/{key}"),
    (re.compile(r"/group/[^/]+"), "/group/{name}"),
]


def endpoint_of(path: str) -> str:
    """A request path with content ids, space keys and group names replaced, for counting calls per endpoint."""
    return endpoint_name(path, _PATH_IDS)


def site_url(url: str, cloud: bool) -> str:
    """The REST root of a site: a Cloud site's ``/wiki`` context path is added where the URL lacks it."""
    url = url.rstrip("/")
    host = urlsplit(url).hostname or ""
    if cloud and host.endswith(".atlassian.net") and not urlsplit(url).path.startswith("/wiki"):
        url += "/wiki"
    return url


def build_confluence_client(
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
) -> Confluence:
    """An atlassian-python-api ``Confluence`` client (REST v1) with counted retries on 429 (Retry-After), 5xx and
    dropped connections, and a deadline per attempt.

    Cloud takes e-mail + API token (Basic); Data Center a personal access token (Bearer), or user + password.
    """
    missing = (
        "Confluence credentials missing: set CONFLUENCE_USERNAME and CONFLUENCE_API_TOKEN (Cloud) or CONFLUENCE_PAT "
        "(Data Center)"
    )
    auth = atlassian_auth(username, api_token, personal_access_token, cloud, missing)
    stats = stats if stats is not None else ApiStats()
    # cloud=False picks the library's REST v1 class for both (see the module docstring).
    client = Confluence(  # type: ignore[no-untyped-call]
        url=site_url(url, cloud),
        cloud=False,
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
