"""What the eval-set miners know of Confluence: a page's address as other documents paste it and who wrote it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

SOURCE = "confluence"
# .../pages/viewpage.action?pageId=123, .../wiki/spaces/DOCS/pages/123/Title, .../pages/123
_PAGE = re.compile(r"https?://[^\s<>|]*?(?:pageId=|/pages/)(\d{2,})[^\s<>|]*")


def page_handle(page_id: str) -> str:
    return f"confluence-page:{page_id}"


def handles(record: Mapping[str, Any]) -> Sequence[str]:
    page_id = record["metadata"].get("page_id")
    return [page_handle(str(page_id))] if page_id else []


def references(text: str) -> Sequence[tuple[int, int, str]]:
    return [(m.start(), m.end(), page_handle(m.group(1))) for m in _PAGE.finditer(text)]


def author_account(record: Mapping[str, Any]) -> str | None:
    account = record["metadata"].get("author_account")
    return f"{SOURCE}:{account}" if isinstance(account, str) and account else None
