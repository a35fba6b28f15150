"""A crafted workspace as the miners read it: documents written as the chain stores them (one raw parquet file per
week, child chunk spans as the chunker cuts them), without running the pipeline."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from rag_pipeline.scheduling.coverage import week_start
from rag_pipeline.sources.document import Acl, Document, content_hash
from rag_pipeline.text.chunking import Chunker, ChunkingConfig

SITE = "jira.acme.com"
TEAM = "T0ACME"
WIKI = "acme.atlassian.net"
PUBLIC_SLACK = Acl(groups=(f"slack:{TEAM}:members",))
OPS = Acl(groups=(f"jira:{SITE}:project:OPS",))
SECRET = Acl(groups=(f"jira:{SITE}:security:10",))
DOCS_SPACE = Acl(groups=(f"confluence:{WIKI}:space:DOCS",))


def document(
    doc_id: str,
    source: str,
    text: str,
    created: str,
    acl: Acl,
    title: str = "",
    url: str | None = None,
    **metadata: Any,
) -> Document:
    when = datetime.fromisoformat(created).replace(tzinfo=UTC)
    return Document(
        id=doc_id,
        source=source,
        container=str(metadata.pop("container", "C0GEN")),
        title=title or text.split("\n", 1)[0][:80],
        text=text,
        url=url,
        created=when,
        updated=when,
        version=when.timestamp(),
        content_hash=content_hash(text),
        acl=acl,
        metadata=metadata,
    )


def jira_doc(
    issue_id: str, key: str, summary: str, description: str, created: str, acl: Acl = OPS, **meta: Any
) -> Document:
    text = f"{key}: {summary}\n\n{description}\n\nComments:\nR (2024-03-01): noted"
    meta.setdefault("reporter_account", "rita")
    return document(
        f"jira:{SITE}:{issue_id}", "jira", text, created, acl, f"{key}: {summary}", f"https://{SITE}/browse/{key}",
        key=key, container=key.split("-")[0], **meta,
    )  # fmt: skip


def slack_thread(
    channel: str, thread_ts: str, messages: list[tuple[str, str, str]], created: str, acl: Acl = PUBLIC_SLACK
) -> Document:
    """``messages``: (user id, name, text); the first is the root."""
    lines = [f"{name}: {text}" for _user, name, text in messages]
    root_user, root_name, root_text = messages[0]
    start = len(root_name) + 2
    return document(
        f"slack:{TEAM}:{channel}:{thread_ts}", "slack", "\n".join(lines), created, acl,
        container=channel, thread_ts=thread_ts, message_count=len(messages), root_user=root_user,
        root_span=[start, start + len(root_text)],
    )  # fmt: skip


def page(page_id: str, title: str, body: str, created: str, author: str = "pat", acl: Acl = DOCS_SPACE) -> Document:
    return document(
        f"confluence:{WIKI}:{page_id}", "confluence", f"{title}\n\n{body}", created, acl, title,
        f"https://{WIKI}/wiki/spaces/DOCS/pages/{page_id}", page_id=page_id, author_account=author, container="DOCS",
    )  # fmt: skip


def write_workspace(root: Path, documents: list[Document], child_tokens: int = 40) -> tuple[list[Path], list[Path]]:
    """Raw and child-chunk parquet files as the chain writes them (``<asset>/<week>.parquet``)."""
    chunker = Chunker(ChunkingConfig(parent_tokens=200, parent_overlap=20, child_tokens=child_tokens, child_overlap=5))
    raw: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    children: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for doc in documents:
        week = week_start(doc.updated.date()).isoformat()
        raw[(doc.source, week)].append(doc.to_record())
        for child in chunker.split(doc.id, doc.text)[1]:
            children[(doc.source, week)].append(
                {
                    "chunk_id": child.id,
                    "document_id": doc.id,
                    "token_start": child.token_start,
                    "text": child.text,
                    "parent_id": child.parent_id,
                }
            )
    raw_files, child_files = [], []
    for (source, week), rows in raw.items():
        path = root / f"{source}_raw" / f"{week}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_parquet(path, index=False)
        raw_files.append(path)
    for (source, week), rows in children.items():
        path = root / f"{source}_child_chunks" / f"{week}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_parquet(path, index=False)
        child_files.append(path)
    return sorted(raw_files), sorted(child_files)
