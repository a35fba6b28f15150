"""Planning a Slack channel's reconciliation from what history lists now.

Threads whose root history no longer lists are removed (a tombstoned root still lists, so its
thread stays). Threads re-listed within the lookback are rebuilt from their current messages;
where the content differs from the index (a deleted reply, an edit nothing else picked up) the
thread is rewritten. Every other indexed thread of the channel, however old, is compared with the
channel's ACL now (private: its members; shared: its external members): a thread whose readers
changed gets the new ACL without being re-read or re-embedded.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from rag_pipeline.connectors.slack.api import SlackApiReader
from rag_pipeline.connectors.slack.threads import thread_document_id
from rag_pipeline.index.store import IndexedDocument
from rag_pipeline.reconciliation.reconcile import ReconcilePlan, acl_differs, newer_than_stored
from rag_pipeline.sources.days import DAY


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
    # One ACL for the whole channel, read now (conversations.info, and conversations.members where it matters).
    acl = reader.channel(channel_id).acl(reader.team_id)
    settled = set(plan.remove) | {d.id for d in plan.rewrite}  # rewritten threads carry the new ACL already
    for doc_id in sorted(set(indexed) & set(listed) - settled):
        if acl_differs(indexed[doc_id], acl):
            plan.acl_updates[doc_id] = acl
    return plan
