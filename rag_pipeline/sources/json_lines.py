"""Reading a dump of JSON lines, gzipped or not, the way every offline connector needs: a ``.gz`` name that is not
gzip is refused before the first read; a damaged file keeps the lines before the damage and reports where it broke;
a file that breaks before its first line is :class:`UnreadableSource` (one skipped record would index nothing and
exit 0)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path

from rag_pipeline.sources.problems import RecordProblem, UnreadableSource, describe

_GZIP_MAGIC = b"\x1f\x8b"


def check_compression(path: Path, what: str) -> bool:
    """Whether the dump at ``path`` (``what``: "Jira dump") is gzipped (its name ends in ``.gz``);
    :class:`UnreadableSource` when the name says gzip and the first bytes do not. gzip itself would only fail at the
    first read, which a reader that keeps the lines before a damage would take for a dump that breaks off before
    its first line."""
    if path.suffix != ".gz":
        return False
    with open(path, "rb") as probe:
        magic = probe.read(len(_GZIP_MAGIC))
    if magic and magic != _GZIP_MAGIC:
        raise UnreadableSource(
            f"{what} {path} is not gzip-compressed, as its name ending in .gz says; compress it (gzip) or "
            "rename it without .gz if it is plain JSON lines"
        )
    return True


def numbered_lines(path: Path, what: str, problems: list[RecordProblem]) -> Iterator[tuple[int, bytes]]:
    """Numbered raw lines of the dump (decoded by the caller, so a bad byte costs its line, not the file)."""
    opener = gzip.open if check_compression(path, what) else open
    number = offset = 0
    try:
        with opener(path, "rb") as handle:
            for number, line in enumerate(handle, start=1):
                offset += len(line)
                yield number, line
    except (EOFError, OSError, zlib.error) as exc:
        if not offset:
            raise UnreadableSource(f"{what} {path} cannot be read: {describe(exc)}") from exc
        problems.append(
            RecordProblem(
                f"{path}:{number + 1}",
                f"the file breaks off after line {number:,} ({offset:,} bytes read): {describe(exc)}; "
                "the lines before it were read",
            )
        )
