"""Plain-text cleaning shared by every source: HTML, control characters and whitespace."""

from __future__ import annotations

import html
import re
import unicodedata

_TAG = re.compile(r"<\s*(script|style)[^>]*>.*?<\s*/\s*\1\s*>|<!--.*?-->", re.S | re.I)
_BLOCK_TAG = re.compile(r"<\s*(br|/p|/div|/li|/tr|/h[1-6])\s*/?\s*>", re.I)
_ANY_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9:-]*(\s[^<>]*)?/?>")
# Invisible format characters (Unicode category Cf) that change how text is displayed or hide text without
# being read: bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069: "Trojan Source" tricks
# such as a U+202E title that reads backwards), zero-width characters, soft hyphen, invisible operators,
# deprecated format controls, interlinear annotations and the tag block (U+E0000-U+E007F, invisible ASCII
# that can smuggle instructions into a model's context). Visible Cf characters (Arabic number signs) stay.
_INVISIBLE_FORMAT = (
    "\u00ad\u180e\u200b-\u200d\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0001\U000e0020-\U000e007f"
)
# The directional marks (LRM, RLM, ALM) only say which way a neutral character runs: body text written in
# Arabic or Hebrew needs them to display correctly, and they reorder nothing, so text keeps them.
_DIRECTION_MARKS = "\u061c\u200e\u200f"
# Everything in Unicode category C except tab and newline: NUL, escape sequences, BOMs, ...
_CONTROL = re.compile(rf"[^\S\n\t ]|[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE_FORMAT}]")
# Titles are one line shown in result lists: no control or invisible character at all, marks included.
_TITLE_DROP = re.compile(rf"[\x00-\x08\x0e-\x1f\x7f-\x9f{_INVISIBLE_FORMAT}{_DIRECTION_MARKS}]")
_TITLE_SPACE = re.compile(r"\s+")
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


_INVISIBLE = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE_FORMAT}]")


def drop_invisible(text: str) -> str:
    """``text`` without control and invisible format characters (tab and newline stay); nothing else changes,
    so well-formed text is returned as it was."""
    return _INVISIBLE.sub("", text)


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


def query_form(text: str) -> str:
    """A query in the form the index's text is written in (:func:`clean_text` is NFC): composed Hangul syllables
    (conjoining jamo sequences composed) and accented letters, whatever form the caller typed — macOS file names,
    some IMEs and copy-paste from them give NFD, which matched nothing by keyword. Width forms are folded by the
    BM25 tokenizer and the encoders for queries and documents alike."""
    return unicodedata.normalize("NFC", text)


def clean_title(text: str) -> str:
    """One display line: NFC, without control or invisible format characters (bidi overrides included),
    whitespace runs (line breaks too) collapsed to one space."""
    text = _TITLE_DROP.sub("", unicodedata.normalize("NFC", text))
    return _TITLE_SPACE.sub(" ", text).strip()
