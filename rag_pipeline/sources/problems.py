"""Bad input records: reported with their location, never allowed to sink the rest of a read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecordProblem:
    """One record that could not be read, and why (``location`` names the file/line/record)."""

    location: str
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


class SourceError(ValueError):
    """The source as a whole is unusable (missing folder, unreadable manifest...)."""


class UnreadableSource(SourceError):
    """The source's data cannot be read at all: a manifest of the wrong shape, a ``.gz`` that is not gzip, a
    file of which no record could be read. The message names the file (and the shape expected). Unlike the
    other source errors (a path or an option to change, a usage error), this is the data's failure."""


class RecordError(ValueError):
    """One record's data tripped something other than the KeyError/TypeError/ValueError every reader catches
    around a record (a RecursionError, an AttributeError on a field of the wrong shape...). The document
    builders re-raise those as this ValueError, so each reader, live ones included, reports the record and
    goes on instead of losing the whole read."""


def describe(exc: BaseException) -> str:
    """An exception as a problem's reason: its type and message (a RecordError already names the type)."""
    text = str(exc) if isinstance(exc, RecordError) else f"{type(exc).__name__}: {exc}"
    # A reason is one line of a log and of a markdown list; a crafted value could carry anything.
    return " ".join(text.split())[:500]


def shown(value: object, limit: int = 80) -> str:
    """A value from the input, quoted and shortened for a problem's text."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
