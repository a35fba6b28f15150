"""The Jira HTTP client: atlassian-python-api's ``Jira`` with counted retries and a deadline per attempt.

requests' ``timeout`` bounds each socket read, so a server that trickles one byte a second would hold a run
forever; here every attempt must be answered in full within the deadline, retries are counted by kind, and
calls are counted per endpoint (ids and keys replaced) for the run's metadata.
"""

from __future__ import annotations

import re
from typing import Unpack

from atlassian import Jira

from rag_pipeline.connectors.atlassian.client import AtlassianClientOptions, build_atlassian_client
from rag_pipeline.sources.http_client import endpoint_name

_PATH_IDS = [
    (re.compile(r"/issue/[^/]+"), "/issue/{issue}"),
    (re.compile(r"/project/(?!search\b)[^/]+"), "/project/{project}"),
    (re.compile(r"/role/\d+"), "/role/{id}"),
    (re.compile(r"/permissionscheme/\d+"), "/permissionscheme/{id}"),
]


def endpoint_of(path: str) -> str:
    """A request path with issue keys and ids replaced, for counting calls per endpoint."""
    return endpoint_name(path, _PATH_IDS)


def build_jira_client(url: str, **options: Unpack[AtlassianClientOptions]) -> Jira:
    """An atlassian-python-api ``Jira`` client with counted retries (the options: :class:`AtlassianClientOptions`).

    Cloud uses e-mail + API token (Basic) and REST v3 (ADF bodies); Server/Data Center uses a
    personal access token (Bearer) or user + password, and REST v2 (wiki bodies).
    """
    missing = "Jira credentials missing: set JIRA_USERNAME and JIRA_API_TOKEN (Cloud) or JIRA_PAT (Server/Data Center)"
    cloud = options.get("cloud", True)
    return build_atlassian_client(
        Jira, url, options, missing=missing, endpoint_of=endpoint_of, cloud=cloud, api_version="3" if cloud else "2"
    )
