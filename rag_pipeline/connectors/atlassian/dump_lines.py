"""Reading an Atlassian dump line by line: one REST object (an issue, a content object) per JSON line.

A dump is input from outside, so every line is read on its own: a blank line is skipped, and a line that is not
JSON, too deeply nested or not an object is a :class:`RecordProblem` naming the file, the line and (where a
pattern finds one in the raw bytes) the record's key or id, while every other line is still read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rag_pipeline.sources.problems import RecordProblem, describe


def located_lines(
    path: Path, lines: Iterable[tuple[int, bytes]], hint: re.Pattern[bytes], shown_as: str
) -> Iterator[tuple[str, bytes]]:
    """(location, raw line) of every non-blank numbered line: ``path:number``, plus ``shown_as`` (a template of
    ``{}``) filled with the first group ``hint`` finds in the raw line, so a problem names the record."""
    for number, raw in lines:
        if not raw.strip():
            continue
        found = hint.search(raw)
        yield f"{path}:{number}" + (shown_as.format(found.group(1).decode()) if found else ""), raw


def json_object(text: str, location: str, kind: str, problems: list[RecordProblem]) -> dict[str, Any] | None:
    """The JSON object ``text`` holds, or None with a problem at ``location`` (``kind``: what the line should be,
    "a Jira issue object"). Any exception while decoding (RecursionError and MemoryError included) is this line's
    problem, never the dump's end."""
    try:
        record = json.loads(text)
    except RecursionError:
        problems.append(RecordProblem(location, "not read: JSON nested too deeply to parse"))
        return None
    except ValueError as exc:
        problems.append(RecordProblem(location, f"not {kind}: {describe(exc)}"))
        return None
    except Exception as exc:  # MemoryError and the like: still this line's problem, not the dump's end
        problems.append(RecordProblem(location, f"not read: {describe(exc)}"))
        return None
    if not isinstance(record, dict):
        problems.append(RecordProblem(location, f"not {kind}: a JSON {type(record).__name__}"))
        return None
    return record
