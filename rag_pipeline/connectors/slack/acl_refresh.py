"""A directory sync's ACL refresh for Slack: a channel's readers live in the index too (its threads'
``acl.users``), so a channel whose readers changed gets its threads' ACL rewritten in place (no re-embedding),
through the reconciliation's ``update_acls``. Registered as ``SLACK.access.refresh_acls``."""

from __future__ import annotations

from rag_pipeline.connectors.slack.threads import workspace_group
from rag_pipeline.directory.store import DirectoryChange
from rag_pipeline.index.store import SearchFilter, VectorStore
from rag_pipeline.reconciliation.reconcile import acl_differs, update_acls
from rag_pipeline.sources.document import Acl

SOURCE = "slack"


def channel_acl(team_id: str, private: bool, readers: tuple[str, ...]) -> Acl:
    """The ACL a channel's threads carry (``SlackChannel.acl``): its members, or the workspace plus externals."""
    return Acl(users=readers) if private else Acl(users=readers, groups=(workspace_group(team_id),))


def refresh_channel_acls(store: VectorStore, team_id: str, change: DirectoryChange) -> list[str]:
    """Rewrite the ACL of every indexed thread of a channel whose readers changed; the documents updated.

    The directory only narrows or re-lists readers: a thread the index holds without the workspace group never
    gains it here. Only a channel's own read (the connector's or the reconciliation's ``conversations.info``,
    which fails the channel when ``is_private`` is missing) may make a private channel's threads readable by
    the whole workspace; a directory record that wrongly says "public" must not."""
    workspace = workspace_group(team_id)
    updates: dict[str, Acl] = {}
    for channel_id, (_name, private, readers) in sorted(change.channels.items()):
        acl = channel_acl(team_id, private, readers)
        indexed = store.indexed_documents(SearchFilter(sources=(SOURCE,), containers=(channel_id,)))
        for doc_id, doc in indexed.items():
            widens = workspace in acl.groups and (doc.acl is None or workspace not in doc.acl.groups)
            if acl_differs(doc, acl) and not widens:
                updates[doc_id] = acl
    return update_acls(store, updates) if updates else []
