"""Model folders converted at first use, published whole: written aside, then renamed into place."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def written_aside(target: Path, marker: str) -> Iterator[Path]:
    """A fresh sibling folder of ``target`` to write a model into, renamed to ``target`` when the block ends.

    A crash mid-way leaves no half-written model under the final name, and two processes converting at once
    never touch each other's files: the later rename finds the earlier one's complete folder (its ``marker``
    file exists) and keeps it. A ``target`` without its marker is left over from no complete write and is
    replaced.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f"{target.name}.partial-", dir=target.parent))
    try:
        yield temporary
        if target.exists() and not (target / marker).exists():
            shutil.rmtree(target, ignore_errors=True)
        try:
            temporary.rename(target)
        except OSError:
            if not (target / marker).exists():
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
