"""What the eval-set miners know of Confluence: a page's address as other documents paste it and who wrote it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rag_pipeline.connectors.source_facts import metadata_account, metadata_handles

SOURCE = "confluence"
# .../pages/viewpage.action?pageId=123, .../wiki/spaces/DOCS/pages/123/Title, .../pages/123
_PAGE = re.compile(r"https?://[^\s<>|]*?(?:pageId=|/pages/)(\d{2,})[^\s<>|]*")


def page_handle(page_id: str) -> str:
    return f"confluence-page:{page_id}"


def handles(record: Mapping[str, Any]) -> Sequence[str]:
    return metadata_handles(record, "page_id", page_handle)


def references(text: str) -> Sequence[tuple[int, int, str]]:
    return [(m.start(), m.end(), page_handle(m.group(1))) for m in _PAGE.finditer(text)]


def author_account(record: Mapping[str, Any]) -> str | None:
    return metadata_account(record, SOURCE, "author_account")
