"""Container identifiers (Slack channel ids, Jira project keys) as they enter the pipeline.

They become Dagster partition keys and path components under the data folder, so one charset and one
length cap apply wherever they come from (an export, a dump, an API listing): letters, digits, ``_``
and ``-``, starting with a letter or digit, at most 64 characters. That excludes ``/``, ``..``, ``|``
(Dagster's multi-partition separator), whitespace and control characters, which real Slack channel
ids (``C0123ABC``) and Jira project keys (``TIMOB``) never contain.
"""

from __future__ import annotations

import re

MAX_CONTAINER_ID_LENGTH = 64
_CONTAINER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class InvalidIdentifier(ValueError):
    """A channel id or project key that cannot be a partition key or a path component."""


def is_valid_container_id(value: object) -> bool:
    return isinstance(value, str) and _CONTAINER_ID.fullmatch(value) is not None


def check_container_id(value: object, what: str) -> str:
    """``value`` if it is a valid container id, else :class:`InvalidIdentifier` naming ``what`` (e.g. "Slack
    channel id in channels.json entry 3")."""
    if is_valid_container_id(value):
        return str(value)
    shown = repr(value)[:80]
    raise InvalidIdentifier(
        f"{what} {shown} is not a valid id: use 1-{MAX_CONTAINER_ID_LENGTH} letters, digits, '_' or '-', "
        "starting with a letter or digit"
    )


def display_name(value: object, fallback: str, limit: int) -> str:
    """A container's name as a listing gave it, fit for logs, run tags and messages: printable characters only
    (a crafted name cannot break a log line), at most ``limit`` characters, else ``fallback``."""
    text = "".join(ch if ch.isprintable() else "?" for ch in value) if isinstance(value, str) else ""
    return text[:limit] or fallback
