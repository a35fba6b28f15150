"""Which search service serves a data folder: ``<data dir>/service.json``, written by ``rag-pipeline serve``.

The embedded index admits one opener per folder, and a running service holds it. A reader started beside it (the
stdio MCP server, a second ``serve``) reads this record to find the service and send its work there instead of
waiting for a folder the service would only lend between queries. The record names the process, so a record left
by a service that was killed is recognised as stale (its pid is gone) and ignored.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

RECORD_NAME = "service.json"


@dataclass(frozen=True)
class ServiceRecord:
    """A running search service: its process, where it listens (for callers on this machine) and how it
    authenticates (``token`` or ``oidc``)."""

    pid: int
    url: str
    auth: str
    started: float


def record_path(data_dir: Path) -> Path:
    return Path(data_dir) / RECORD_NAME


def record_service(data_dir: Path, record: ServiceRecord) -> None:
    """Written whole, then renamed, so a reader never sees half a record."""
    path = record_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(f".{os.getpid()}.tmp")
    temp.write_text(json.dumps(asdict(record)) + "\n", encoding="utf-8")
    temp.replace(path)


def clear_service(data_dir: Path, pid: int) -> None:
    """Remove the record if it is this process's (a later service's record stays)."""
    found = _read(record_path(data_dir))
    if found is not None and found.pid == pid:
        record_path(data_dir).unlink(missing_ok=True)


def live_service(data_dir: Path) -> ServiceRecord | None:
    """The service recorded for ``data_dir`` if its process is alive (not this one); None otherwise."""
    found = _read(record_path(data_dir))
    if found is None or found.pid == os.getpid():
        return None
    try:
        os.kill(found.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        return found
    return found


def _read(path: Path) -> ServiceRecord | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ServiceRecord(int(data["pid"]), str(data["url"]), str(data["auth"]), float(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
