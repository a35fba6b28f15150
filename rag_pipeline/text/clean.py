"""Plain-text cleaning shared by every source: HTML, control characters and whitespace."""

from __future__ import annotations

import html
import re
import unicodedata

_TAG = re.compile(r"<\s*(script|style)[^>]*>.*?<\s*/\s*\1\s*>|<!--.*?-->", re.S | re.I)
_BLOCK_TAG = re.compile(r"<\s*(br|/p|/div|/li|/tr|/h[1-6])\s*/?\s*>", re.I)
_ANY_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9:-]*(\s[^<>]*)?/?>")
# Everything in Unicode category C except tab and newline: NUL, escape sequences, BOMs, ...
_CONTROL = re.compile(r"[^\S\n\t ]|[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u200c\u200d\u2060\ufeff]")
_SPACES = re.compile(r"[ \t]+")
_BLANK_LINES = re.compile(r"\n{3,}")


_HTML_MARKERS = re.compile(
    r"</?(p|div|br|span|a|table|tr|td|ul|ol|li|h[1-6]|pre|code|b|i|em|strong)(\s[^<>]*)?/?>", re.I
)


def looks_like_html(text: str) -> bool:
    """True for bodies written in HTML (several common tags), not for text that merely contains ``<``.

    Jira and Slack bodies often carry XML or generics in code (``<Alloy>``, ``List<String>``), which
    must survive cleaning.
    """
    return len(_HTML_MARKERS.findall(text, 0, 20000)) >= 2


def strip_html(text: str) -> str:
    """Drop tags (keeping line structure of block tags) and decode entities."""
    if "<" in text:
        text = _TAG.sub(" ", text)
        text = _BLOCK_TAG.sub("\n", text)
        text = _ANY_TAG.sub("", text)
    return html.unescape(text)


def clean_text(text: str) -> str:
    """Normalize text for chunking and indexing.

    NFC-normalizes, turns CRLF into LF, removes control and zero-width characters, collapses runs
    of spaces, trims every line and keeps at most one blank line between paragraphs.
    """
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub(lambda m: " " if m.group(0) in "\u00a0\u2028\u2029\x0b\x0c" else "", text)
    text = _SPACES.sub(" ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", text).strip()
