"""A long query split the way keyword search wants it: a title line, and a body without machine noise.

Jira queries are whole issues (summary, then a description with ``{code}`` blocks, stack traces, logs
and links) and Slack thread roots often paste terminal output. Qdrant's BM25 gives every distinct query
term weight 1, so a 300-term issue is mostly identifiers from code and log lines that many unrelated
issues share. The summary line, in contrast, is what a person wrote to describe the problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A first line is a title when the text goes on after it and the line is short enough to be one.
MAX_TITLE_WORDS = 30

# Jira wiki markup blocks whose content is machine text (code, logs, pasted output).
_BLOCK = re.compile(r"\{(code|noformat)(?::[^}]*)?\}.*?(?:\{\1\}|$)", re.DOTALL | re.IGNORECASE)
_MARKDOWN_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
# [label|https://…] keeps its label; bare URLs go.
_LINK = re.compile(r"\[([^|\]\n]*)\|[^\]\n]*\]")
_URL = re.compile(r"\b(?:https?|ftp|file)://\S+", re.IGNORECASE)
# Stack frames (Java/JS "at x.y(…)", Python 'File "…", line N', iOS "3  App  0x0001 …") and
# log-prefixed lines ("[ERROR] :  …" keeps its message, the prefix and timestamps go).
_FRAME = re.compile(
    r"^\s*(?:at\s+[\w$.<>]+\s*\(.*\)|File \".*\", line \d+.*|\d+\s+\S+\s+0x[0-9a-f]+.*|\.\.\. \d+ more)\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_LOG_PREFIX = re.compile(
    r"^\s*(?:\[?\d{4}-\d\d-\d\d[ T][\d:.,]+\]?\s*)?\[(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR)\]\s*:?\s*", re.I | re.M
)
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{16,}\b", re.IGNORECASE)


@dataclass(frozen=True)
class QueryParts:
    """``title``: the first line when it reads as one (else empty); ``body``: the rest (or the whole text)."""

    title: str
    body: str


def split_query(text: str, max_title_words: int = MAX_TITLE_WORDS) -> QueryParts:
    """Title and body of a query. A one-line query has no title: all of it is body."""
    stripped = text.strip()
    first, _, rest = stripped.partition("\n")
    if rest.strip() and 0 < len(first.split()) <= max_title_words:
        return QueryParts(title=first.strip(), body=rest.strip())
    return QueryParts(title="", body=stripped)


def prose(text: str) -> str:
    """``text`` without code/noformat blocks, stack frames, URLs, hex ids and log prefixes: the words a
    person wrote. Error messages on log lines stay (duplicates often share them)."""
    text = _BLOCK.sub(" ", text)
    text = _MARKDOWN_FENCE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    text = _FRAME.sub(" ", text)
    text = _LOG_PREFIX.sub("", text)
    return _HEX.sub(" ", text)
