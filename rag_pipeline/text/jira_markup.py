"""Jira bodies to readable text: Atlassian Document Format (Cloud, REST v3) and wiki markup (v2)."""

from __future__ import annotations

import re
from collections.abc import Callable
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


def adf_to_text(node: dict[str, Any]) -> str:
    """Render an ADF document as markdown-ish text; unknown nodes degrade to their text content."""
    return _collapse(_render(node, _Ctx()))


class _Ctx:
    def __init__(self, depth: int = 0) -> None:
        self.depth = depth


def _children(node: dict[str, Any], ctx: _Ctx, sep: str = "") -> str:
    return sep.join(_render(child, ctx) for child in node.get("content") or [] if isinstance(child, dict))


def _text(node: dict[str, Any], ctx: _Ctx) -> str:
    text: str = node.get("text", "")
    for mark in node.get("marks") or []:
        kind, attrs = mark.get("type"), mark.get("attrs") or {}
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
    inner = _Ctx(ctx.depth + 1)
    items = []
    for i, item in enumerate(c for c in node.get("content") or [] if isinstance(c, dict)):
        marker = f"{i + 1}." if ordered else "-"
        body = _render(item, inner).strip()
        items.append("  " * ctx.depth + f"{marker} {body}")
    return "\n".join(items) + _BLOCK_SEP


def _table(node: dict[str, Any], ctx: _Ctx) -> str:
    rows = []
    for row in node.get("content") or []:
        cells = [_collapse(_render(cell, ctx)).replace("\n", " ") for cell in row.get("content") or []]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + _BLOCK_SEP


def _media(node: dict[str, Any], ctx: _Ctx) -> str:
    attrs = node.get("attrs") or {}
    name = attrs.get("alt") or attrs.get("filename") or attrs.get("id") or "attachment"
    return f"[media: {name}]"


def _card(node: dict[str, Any], ctx: _Ctx) -> str:
    attrs = node.get("attrs") or {}
    url = attrs.get("url") or (attrs.get("data") or {}).get("url") or ""
    return f"{url}" if node["type"] == "inlineCard" else f"{url}{_BLOCK_SEP}"


def _task(node: dict[str, Any], ctx: _Ctx) -> str:
    done = (node.get("attrs") or {}).get("state") in ("DONE", "DECIDED")
    box = "[x]" if done else "[ ]"
    return "  " * ctx.depth + f"{box} {_children(node, ctx).strip()}\n"


_RENDERERS: dict[str, Callable[[dict[str, Any], _Ctx], str]] = {
    "doc": lambda n, c: _children(n, c),
    "text": _text,
    "paragraph": lambda n, c: _children(n, c) + _BLOCK_SEP,
    "hardBreak": lambda n, c: "\n",
    "heading": lambda n, c: "#" * int((n.get("attrs") or {}).get("level", 1)) + " " + _children(n, c) + _BLOCK_SEP,
    "bulletList": lambda n, c: _list(n, c, ordered=False),
    "orderedList": lambda n, c: _list(n, c, ordered=True),
    "listItem": lambda n, c: _children(n, c).strip().replace(_BLOCK_SEP, "\n"),
    "codeBlock": lambda n, c: (
        "```" + ((n.get("attrs") or {}).get("language") or "") + "\n" + _children(n, c) + "\n```" + _BLOCK_SEP
    ),
    "blockquote": lambda n, c: "\n".join("> " + line for line in _collapse(_children(n, c)).split("\n")) + _BLOCK_SEP,
    "panel": lambda n, c: f"[{(n.get('attrs') or {}).get('panelType', 'info')}] " + _children(n, c),
    "rule": lambda n, c: "---" + _BLOCK_SEP,
    "table": _table,
    "tableRow": lambda n, c: _children(n, c, " | "),
    "tableHeader": lambda n, c: _children(n, c).strip(),
    "tableCell": lambda n, c: _children(n, c).strip(),
    "mention": lambda n, c: "@" + str((n.get("attrs") or {}).get("text", "")).lstrip("@"),
    "emoji": lambda n, c: str((n.get("attrs") or {}).get("text") or (n.get("attrs") or {}).get("shortName", "")),
    "inlineCard": _card,
    "blockCard": _card,
    "embedCard": _card,
    "media": _media,
    "mediaInline": _media,
    "mediaSingle": lambda n, c: _children(n, c) + _BLOCK_SEP,
    "mediaGroup": lambda n, c: _children(n, c, " ") + _BLOCK_SEP,
    "status": lambda n, c: "[" + str((n.get("attrs") or {}).get("text", "")) + "]",
    "date": lambda n, c: _adf_date((n.get("attrs") or {}).get("timestamp")),
    "expand": lambda n, c: str((n.get("attrs") or {}).get("title") or "") + "\n" + _children(n, c),
    "nestedExpand": lambda n, c: str((n.get("attrs") or {}).get("title") or "") + "\n" + _children(n, c),
    "decisionList": lambda n, c: _children(n, c) + "\n",
    "decisionItem": _task,
    "taskList": lambda n, c: _children(n, c) + "\n",
    "taskItem": _task,
    "placeholder": lambda n, c: "",
}


def _adf_date(timestamp: Any) -> str:
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(int(timestamp) / 1000, tz=UTC).strftime("%Y-%m-%d")
    except (TypeError, ValueError):
        return str(timestamp or "")


def _render(node: dict[str, Any], ctx: _Ctx) -> str:
    renderer = _RENDERERS.get(str(node.get("type")))
    if renderer is None:
        # Unknown or future node types: keep whatever text they carry rather than fail the issue.
        text: str = node.get("text", "")
        return text + _children(node, ctx)
    return renderer(node, ctx)


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
