"""The Confluence HTTP client: atlassian-python-api's ``Confluence`` (REST v1) with counted retries and a deadline
per attempt, the same transport policy as the Jira client.

REST v1 for Cloud too: the 5.x library's Cloud class speaks REST v2, which has no CQL search returning storage
bodies, ancestors and read restrictions in one call; Cloud still serves v1 content search, content, restrictions,
space and group endpoints under ``/wiki/rest/api``. Cloud sites are therefore given the v1 client with their
``/wiki`` context path.
"""

from __future__ import annotations

import re
from typing import Unpack
from urllib.parse import urlsplit

from atlassian import Confluence

# The client wiring and its retry and deadline policy are the Atlassian kernel's, shared with the Jira client.
from rag_pipeline.connectors.atlassian.client import AtlassianClientOptions, build_atlassian_client
from rag_pipeline.sources.http_client import endpoint_name

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


def build_confluence_client(url: str, **options: Unpack[AtlassianClientOptions]) -> Confluence:
    """An atlassian-python-api ``Confluence`` client (REST v1) with counted retries on 429 (Retry-After), 5xx and
    dropped connections, and a deadline per attempt (the options: :class:`AtlassianClientOptions`).

    Cloud takes e-mail + API token (Basic); Data Center a personal access token (Bearer), or user + password.
    """
    missing = (
        "Confluence credentials missing: set CONFLUENCE_USERNAME and CONFLUENCE_API_TOKEN (Cloud) or CONFLUENCE_PAT "
        "(Data Center)"
    )
    # cloud=False picks the library's REST v1 class for both (see the module docstring).
    site = site_url(url, options.get("cloud", True))
    return build_atlassian_client(Confluence, site, options, missing=missing, endpoint_of=endpoint_of, cloud=False)
