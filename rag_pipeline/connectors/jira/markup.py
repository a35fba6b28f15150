"""Jira bodies to readable text: Atlassian Document Format (Cloud, REST v3) and wiki markup (v2)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any


def jira_body_to_text(body: Any) -> str:
    """Render a Jira description or comment body, whichever format it arrives in."""
    if body is None:
        return ""
    if isinstance(body, dict):
        return adf_to_text(body)
    if isinstance(body, str):
        return wiki_to_text(body)
    raise TypeError(f"unsupported Jira body type {type(body).__name__}; expected ADF dict or string")


# --- ADF -------------------------------------------------------------------------------------

_BLOCK_SEP = "\n\n"


# Nesting deeper than this is rendered as plain text without recursion. Real documents nest a few levels
# (a list in a table in a panel); a crafted one 5,000 levels deep would otherwise exhaust Python's stack
# (each level costs several frames), and the caller may already be deep in a Dagster step.
MAX_ADF_DEPTH = 48
# Block nodes that end a line when deep content is flattened.
_FLAT_BLOCKS = frozenset(
    {"paragraph", "heading", "listItem", "codeBlock", "blockquote", "tableRow", "panel", "taskItem", "decisionItem"}
)


def adf_to_text(node: dict[str, Any]) -> str:
    """Render an ADF document as markdown-ish text; unknown nodes degrade to their text content, and nodes
    nested deeper than :data:`MAX_ADF_DEPTH` to their plain text."""
    return _collapse(_render(node, _Ctx()))


class _Ctx:
    """``depth``: list indentation; ``level``: how deep the node being rendered is nested."""

    def __init__(self, depth: int = 0, level: int = 0) -> None:
        self.depth = depth
        self.level = level


def _content(node: dict[str, Any]) -> list[dict[str, Any]]:
    content = node.get("content")
    return [c for c in content if isinstance(c, dict)] if isinstance(content, list) else []


def _attrs(node: dict[str, Any]) -> dict[str, Any]:
    attrs = node.get("attrs")
    return attrs if isinstance(attrs, dict) else {}


def _children(node: dict[str, Any], ctx: _Ctx, sep: str = "") -> str:
    return sep.join(_render(child, ctx) for child in _content(node))


def _own_text(node: dict[str, Any]) -> str:
    text = node.get("text")
    return text if isinstance(text, str) else ""


def _text(node: dict[str, Any], ctx: _Ctx) -> str:
    text = _own_text(node)
    marks = node.get("marks")
    for mark in marks if isinstance(marks, list) else []:
        if not isinstance(mark, dict):
            continue
        kind, attrs = mark.get("type"), _attrs(mark)
        if kind == "code":
            text = f"`{text}`"
        elif kind == "strong":
            text = f"**{text}**"
        elif kind == "em":
            text = f"_{text}_"
        elif kind == "strike":
            text = f"~~{text}~~"
        elif kind == "link" and attrs.get("href") and attrs["href"] != text:
            text = f"{text} ({attrs['href']})"
    return text


def _list(node: dict[str, Any], ctx: _Ctx, ordered: bool) -> str:
    inner = _Ctx(ctx.depth + 1, ctx.level)
    items = []
    for i, item in enumerate(_content(node)):
        marker = f"{i + 1}." if ordered else "-"
        body = _render(item, inner).strip()
        items.append("  " * ctx.depth + f"{marker} {body}")
    return "\n".join(items) + _BLOCK_SEP


def _table(node: dict[str, Any], ctx: _Ctx) -> str:
    rows = []
    for row in _content(node):
        cells = [_collapse(_render(cell, ctx)).replace("\n", " ") for cell in _content(row)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + _BLOCK_SEP


def _media(node: dict[str, Any], ctx: _Ctx) -> str:
    attrs = _attrs(node)
    name = attrs.get("alt") or attrs.get("filename") or attrs.get("id") or "attachment"
    return f"[media: {name}]"


def _card(node: dict[str, Any], ctx: _Ctx) -> str:
    attrs = _attrs(node)
    data = attrs.get("data")
    url = attrs.get("url") or (data.get("url") if isinstance(data, dict) else None) or ""
    return f"{url}" if node["type"] == "inlineCard" else f"{url}{_BLOCK_SEP}"


def _task(node: dict[str, Any], ctx: _Ctx) -> str:
    done = _attrs(node).get("state") in ("DONE", "DECIDED")
    box = "[x]" if done else "[ ]"
    return "  " * ctx.depth + f"{box} {_children(node, ctx).strip()}\n"


_RENDERERS: dict[str, Callable[[dict[str, Any], _Ctx], str]] = {
    "doc": lambda n, c: _children(n, c),
    "text": _text,
    "paragraph": lambda n, c: _children(n, c) + _BLOCK_SEP,
    "hardBreak": lambda n, c: "\n",
    "heading": lambda n, c: "#" * _heading_level(n) + " " + _children(n, c) + _BLOCK_SEP,
    "bulletList": lambda n, c: _list(n, c, ordered=False),
    "orderedList": lambda n, c: _list(n, c, ordered=True),
    "listItem": lambda n, c: _children(n, c).strip().replace(_BLOCK_SEP, "\n"),
    "codeBlock": lambda n, c: (
        "```" + str(_attrs(n).get("language") or "") + "\n" + _children(n, c) + "\n```" + _BLOCK_SEP
    ),
    "blockquote": lambda n, c: "\n".join("> " + line for line in _collapse(_children(n, c)).split("\n")) + _BLOCK_SEP,
    "panel": lambda n, c: f"[{_attrs(n).get('panelType', 'info')}] " + _children(n, c),
    "rule": lambda n, c: "---" + _BLOCK_SEP,
    "table": _table,
    "tableRow": lambda n, c: _children(n, c, " | "),
    "tableHeader": lambda n, c: _children(n, c).strip(),
    "tableCell": lambda n, c: _children(n, c).strip(),
    "mention": lambda n, c: "@" + str(_attrs(n).get("text", "")).lstrip("@"),
    "emoji": lambda n, c: str(_attrs(n).get("text") or _attrs(n).get("shortName", "")),
    "inlineCard": _card,
    "blockCard": _card,
    "embedCard": _card,
    "media": _media,
    "mediaInline": _media,
    "mediaSingle": lambda n, c: _children(n, c) + _BLOCK_SEP,
    "mediaGroup": lambda n, c: _children(n, c, " ") + _BLOCK_SEP,
    "status": lambda n, c: "[" + str(_attrs(n).get("text", "")) + "]",
    "date": lambda n, c: _adf_date(_attrs(n).get("timestamp")),
    "expand": lambda n, c: str(_attrs(n).get("title") or "") + "\n" + _children(n, c),
    "nestedExpand": lambda n, c: str(_attrs(n).get("title") or "") + "\n" + _children(n, c),
    "decisionList": lambda n, c: _children(n, c) + "\n",
    "decisionItem": _task,
    "taskList": lambda n, c: _children(n, c) + "\n",
    "taskItem": _task,
    "placeholder": lambda n, c: "",
}


def _heading_level(node: dict[str, Any]) -> int:
    # ADF allows 1-6; a crafted level of 10**9 would otherwise build a gigabyte of '#'.
    try:
        return min(max(int(_attrs(node).get("level", 1)), 1), 6)
    except (TypeError, ValueError, OverflowError):
        return 1


def _adf_date(timestamp: Any) -> str:
    try:
        return datetime.fromtimestamp(int(timestamp) / 1000, tz=UTC).strftime("%Y-%m-%d")
    except (TypeError, ValueError, OverflowError, OSError):
        return str(timestamp or "")


def _render(node: dict[str, Any], ctx: _Ctx) -> str:
    if ctx.level >= MAX_ADF_DEPTH:
        return _flat_text(node)
    ctx.level += 1
    try:
        renderer = _RENDERERS.get(str(node.get("type")))
        if renderer is None:
            # Unknown or future node types: keep whatever text they carry rather than fail the issue.
            return _own_text(node) + _children(node, ctx)
        return renderer(node, ctx)
    finally:
        ctx.level -= 1


def _flat_text(node: dict[str, Any]) -> str:
    """Every text of a subtree in document order, one line per block, walked with an explicit stack."""
    parts: list[str] = []
    stack: list[dict[str, Any] | str] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        parts.append(_own_text(item))
        if item.get("type") in _FLAT_BLOCKS:
            stack.append("\n")
        stack.extend(reversed(_content(item)))
    return "".join(parts)


def _collapse(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# --- Wiki markup ------------------------------------------------------------------------------

_WIKI_CODE = re.compile(r"\{(code|noformat)(?::[^}]*)?\}(.*?)\{\1\}", re.S)
_WIKI_RULES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (
        re.compile(r"\{quote\}(.*?)\{quote\}", re.S),
        lambda m: "\n".join("> " + ln for ln in m.group(1).strip().splitlines()),
    ),
    (re.compile(r"\{(?:color|panel|section|column|html)(?::[^}]*)?\}"), ""),
    (re.compile(r"^h([1-6])\.\s*", re.M), lambda m: "#" * int(m.group(1)) + " "),
    (re.compile(r"\[~([^\]]+)\]"), r"@\1"),
    (re.compile(r"\[([^\]|]+)\|([^\]]+)\]"), lambda m: f"{m.group(1).strip()} ({m.group(2).strip()})"),
    (re.compile(r"\[((?:https?|mailto|file):[^\]]+)\]"), r"\1"),
    (re.compile(r"!([^!\s|]+\.[A-Za-z0-9]{2,5})(?:\|[^!]*)?!"), r"[media: \1]"),
    (
        re.compile(r"^\s*\|\|(.*)\|\|\s*$", re.M),
        lambda m: "| " + " | ".join(c.strip() for c in m.group(1).split("||")) + " |",
    ),
    (re.compile(r"(?<![\w*])\*(\S(?:[^*\n]*\S)?)\*(?![\w*])"), r"**\1**"),
    (re.compile(r"\{\{(.+?)\}\}"), r"`\1`"),
    (re.compile(r"^bq\.\s*", re.M), "> "),
    (re.compile(r"^----\s*$", re.M), "---"),
]


def wiki_to_text(text: str) -> str:
    """Render Jira wiki markup (Server/Data Center and REST v2 bodies) as markdown-ish text."""
    # Code is set aside first so inline rules (bold, links, ...) never rewrite source code.
    blocks: list[str] = []

    def set_aside(match: re.Match[str]) -> str:
        blocks.append(f"\n```\n{match.group(2).strip()}\n```\n")
        return f"\x00{len(blocks) - 1}\x00"

    text = _WIKI_CODE.sub(set_aside, text)
    for pattern, replacement in _WIKI_RULES:
        text = pattern.sub(replacement, text)
    text = re.sub(r"\x00(\d+)\x00", lambda m: blocks[int(m.group(1))], text)
    return text.strip()
