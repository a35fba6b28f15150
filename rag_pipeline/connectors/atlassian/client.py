"""The HTTP client of an Atlassian connector: atlassian-python-api's client class with the kernel's transport
policy (counted retries on 429 with Retry-After, 5xx and dropped connections, a deadline per attempt, calls
counted per endpoint).

Each connector's builder takes the same keyword options (:class:`AtlassianClientOptions`) and adds only what its
class needs (the REST version, the site's context path), so the defaults and the wiring are written once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict, TypeVar

from atlassian.rest_client import AtlassianRestAPI

from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.http_client import RETRY_STATUSES, atlassian_auth, counted_transport

Client = TypeVar("Client", bound=AtlassianRestAPI)


class AtlassianClientOptions(TypedDict, total=False):
    """The keyword options of a connector's client builder; unset ones take :data:`CLIENT_DEFAULTS`.

    Cloud takes e-mail + API token (Basic); Server/Data Center a personal access token (Bearer), or user + password.
    ``timeout`` is the deadline per attempt in seconds; ``stats`` receives the calls and retries."""

    username: str | None
    api_token: str | None
    personal_access_token: str | None
    cloud: bool
    stats: ApiStats | None
    max_retries: int
    backoff_seconds: float
    timeout: int


CLIENT_DEFAULTS: AtlassianClientOptions = {"cloud": True, "max_retries": 8, "backoff_seconds": 1.0, "timeout": 30}


def build_atlassian_client(
    make: Callable[..., Client],
    url: str,
    options: AtlassianClientOptions,
    *,
    missing: str,
    endpoint_of: Callable[[str], str],
    **library: Any,
) -> Client:
    """``make(url=..., **library)`` (the library's ``Jira`` or ``Confluence``) with ``options``' credentials and the
    counted transport mounted. ``missing`` is the error when no usable credentials are given (it names the
    variables); ``endpoint_of`` names a request path's endpoint for the call counts.

    The library's ``backoff_and_retry`` mounts urllib3 retries for 429/503 honouring Retry-After; they are replaced
    by the kernel's policy, widened to 500/502/504 and dropped connections, and counted."""
    given: AtlassianClientOptions = {**CLIENT_DEFAULTS, **options}
    auth = atlassian_auth(
        given.get("username"), given.get("api_token"), given.get("personal_access_token"), given["cloud"], missing
    )
    stats = given.get("stats")
    stats = stats if stats is not None else ApiStats()
    max_retries, backoff_seconds, timeout = given["max_retries"], given["backoff_seconds"], given["timeout"]
    client = make(
        url=url,
        timeout=timeout,
        backoff_and_retry=True,
        retry_status_codes=list(RETRY_STATUSES),
        max_backoff_retries=max_retries,
        backoff_factor=backoff_seconds,
        **auth,
        **library,
    )
    counted_transport(client.session, client.url, stats, endpoint_of, max_retries, backoff_seconds, timeout)
    client.stats = stats  # type: ignore[attr-defined]
    return client
