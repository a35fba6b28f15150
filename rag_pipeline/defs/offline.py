"""Reading an offline source file once per version of it (shared by the export and dump resources)."""

from pathlib import Path


def file_version(path: str) -> float:
    """A value that changes when the file (or folder) is replaced: its modification time."""
    return Path(path).stat().st_mtime
