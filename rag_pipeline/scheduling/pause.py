"""One switch that pauses all scheduled ingestion: the sync sensors and the reconciliation schedules of every source.

The switch is a file in the data folder (``ingestion_paused.json``: when, by whom, why), written by
``rag-pipeline pause`` and removed by ``rag-pipeline resume``, so it takes effect at the daemon's next tick without a
restart; ``RAG_INGESTION_PAUSED=1`` pauses a deployment from its configuration instead (a restart to lift). Runs
started by hand (``rag-pipeline sync``/``index``, the UI) still run: the switch stops what runs *by itself*. The
principal directory keeps refreshing, so access changes (someone leaving) still apply while content is paused.
Nothing is lost by a pause: each container's watermark stays where it was, and the first tick after ``resume``
plans the catch-up from it.
"""

from __future__ import annotations

import getpass
import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

PAUSE_FILE = "ingestion_paused.json"


@dataclass(frozen=True)
class IngestionPause:
    """Why scheduled ingestion is paused: since when, by whom, and the reason given."""

    paused_at: str
    by: str
    reason: str

    def describe(self) -> str:
        why = f": {self.reason}" if self.reason else ""
        return f"ingestion paused by {self.by} at {self.paused_at}{why} (`rag-pipeline resume` lifts it)"


def pause_file(data_dir: Path) -> Path:
    return data_dir / PAUSE_FILE


def current_pause(data_dir: Path, paused_by_setting: bool = False) -> IngestionPause | None:
    """The pause in force: the data folder's switch, else the setting (``RAG_INGESTION_PAUSED``); None when off.
    An unreadable switch file counts as paused (someone meant to pause), and says so."""
    path = pause_file(data_dir)
    if path.exists():
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return IngestionPause(str(raw.get("paused_at", "")), str(raw.get("by", "")), str(raw.get("reason", "")))
        except (OSError, ValueError, AttributeError) as exc:
            return IngestionPause("", "an unreadable switch file", f"{path} ({type(exc).__name__})")
    if paused_by_setting:
        return IngestionPause("", "RAG_INGESTION_PAUSED", "set in the configuration (unset it and restart)")
    return None


def pause(data_dir: Path, reason: str = "") -> IngestionPause:
    """Switch scheduled ingestion off (written atomically; pausing again replaces the reason)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    record = IngestionPause(datetime.now(UTC).isoformat(timespec="seconds"), _who(), reason.strip())
    path = pause_file(data_dir)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(asdict(record)), encoding="utf-8")
    os.replace(partial, path)
    return record


def resume(data_dir: Path) -> IngestionPause | None:
    """Switch scheduled ingestion back on; the pause it lifted (None when there was none)."""
    lifted = current_pause(data_dir)
    pause_file(data_dir).unlink(missing_ok=True)
    return lifted


def _who() -> str:
    try:
        return f"{getpass.getuser()} (pid {os.getpid()})"
    except (KeyError, OSError):  # no passwd entry in a container
        return f"uid {os.getuid()} (pid {os.getpid()})"
