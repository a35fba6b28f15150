"""Which containers a live source keeps: allow and deny lists of names or regular expressions (deny wins)."""

from __future__ import annotations

import re
from collections.abc import Sequence


def matches(pattern: str, key: str) -> bool:
    """``key`` is ``pattern`` or matches it as a whole regular expression (an invalid one matches nothing)."""
    try:
        return pattern == key or re.fullmatch(pattern, key) is not None
    except re.error:
        return False


def kept(key: str, allow: Sequence[str], deny: Sequence[str]) -> bool:
    """Whether a container passes the lists: named by no deny entry, and by an allow entry where there are any."""
    if any(matches(p, key) for p in deny):
        return False
    return not allow or any(matches(p, key) for p in allow)
