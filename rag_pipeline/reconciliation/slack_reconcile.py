"""Planning a Slack channel's reconciliation from what history lists now.

Threads whose root history no longer lists are removed (a tombstoned root still lists, so its
thread stays). Threads re-listed within the lookback are rebuilt from their current messages;
where the content differs from the index (a deleted reply, an edit nothing else picked up) the
thread is rewritten.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from rag_pipeline.index.store import IndexedDocument
from rag_pipeline.reconciliation.reconcile import ReconcilePlan, newer_than_stored
from rag_pipeline.sources.days import DAY
from rag_pipeline.sources.slack_api import SlackApiReader
from rag_pipeline.sources.slack_threads import thread_document_id


def plan_channel(
    reader: SlackApiReader,
    channel_id: str,
    indexed: Mapping[str, IndexedDocument],
    lookback_days: int,
    now: float | None = None,
) -> ReconcilePlan:
    """Compare the channel's indexed threads (``indexed``: this channel's documents) with Slack."""
    now = time.time() if now is None else now
    plan = ReconcilePlan(container=channel_id)
    roots = reader.thread_roots(channel_id)
    listed = {thread_document_id(reader.team_id, channel_id, r.ts): r for r in roots}
    plan.remove = sorted(doc_id for doc_id in indexed if doc_id not in listed)
    recent = now - lookback_days * DAY
    for doc_id, root in listed.items():
        stored = indexed.get(doc_id)
        if stored is None or float(root.ts) < recent:
            continue
        plan.checked += 1
        current = reader.thread_document(channel_id, root.ts, None if root.reply_count else [root.message])
        if current is None:
            plan.remove.append(doc_id)
        elif current.content_hash != stored.content_hash:
            plan.rewrite.append(newer_than_stored(current, stored))
    return plan
