"""Slack message markup (mrkdwn) to plain text."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping

_ANGLE = re.compile(r"<([^<>]+)>")
# :emoji: and ::skin-tone-2: codes; the letter requirement keeps clock times like 10:30:45 intact.
_EMOJI = re.compile(r"(?<![\w:/]):(?=[a-z0-9_+'-]*[a-z_+'-])[a-z0-9_+'-]+:(?::skin-tone-\d:)?(?![\w/])")


def slack_to_text(
    text: str,
    user_names: Mapping[str, str] | Callable[[str], str | None] | None = None,
    channel_names: Mapping[str, str] | Callable[[str], str | None] | None = None,
) -> str:
    """Render Slack markup as readable text.

    ``<@U123>`` becomes ``@name``, ``<#C123|general>`` becomes ``#general``, ``<url|label>``
    becomes ``label (url)``, special mentions become ``@here`` and friends, ``&amp;`` entities are
    decoded and ``:emoji:`` codes are removed.
    """
    lookup_user = _lookup(user_names)
    lookup_channel = _lookup(channel_names)

    def render(match: re.Match[str]) -> str:
        body = match.group(1)
        target, _, label = body.partition("|")
        if target.startswith("@"):
            uid = target[1:]
            return "@" + (label or lookup_user(uid) or uid)
        if target.startswith("#"):
            cid = target[1:]
            return "#" + (label or lookup_channel(cid) or cid)
        if target.startswith("!"):
            special = target[1:].split("^", 1)[0]
            if label:
                return label if label.startswith("@") else "@" + label
            return "@" + special
        if label and label != target:
            return f"{label} ({_strip_mailto(target)})"
        return _strip_mailto(target)

    text = _ANGLE.sub(render, text)
    text = _EMOJI.sub("", text)
    return html.unescape(text)


def _strip_mailto(target: str) -> str:
    return target[len("mailto:") :] if target.startswith("mailto:") else target


def _lookup(names: Mapping[str, str] | Callable[[str], str | None] | None) -> Callable[[str], str | None]:
    if names is None:
        return lambda _key: None
    if callable(names):
        return names
    return names.get
