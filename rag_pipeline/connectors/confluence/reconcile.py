"""Planning a Confluence space's reconciliation from the pages the space lists now.

Search never returns trashed or deleted pages, so a vanished id is looked up by id: gone (404, trashed) means
deleted and the document leaves the index; found in another space means moved, and the document is rewritten
there (one document per page id), unless the connector does not sync that space, where nothing would reconcile it
again, so it leaves the index. A space the API user can no longer view takes its documents with it.

A page still listed keeps its document, but its readers are checked: the listing carries each page's own read
restriction and ancestors, so a restriction added, changed or removed anywhere up the tree (or a move under
another parent) changes the ACL the page needs, which is applied in place. A move under another parent also
changes the title path: where the caller knows the ancestors each document was indexed under (``ancestors``, the
``ancestors`` payload field), such a page is rewritten; a listing that cannot say (a restriction unknown there)
changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rag_pipeline.connectors.confluence.api import ConfluenceAccessError, ConfluenceApiReader, ConfluenceSpace
from rag_pipeline.index.store import IndexedDocument
from rag_pipeline.reconciliation.reconcile import ReconcilePlan, acl_differs, newer_than_stored


def plan_space(
    reader: ConfluenceApiReader,
    space_key: str,
    indexed: Mapping[str, IndexedDocument],
    ancestors: Mapping[str, Sequence[str]] | None = None,
) -> ReconcilePlan:
    """Compare the space's indexed pages (``indexed``: this space's documents) with Confluence."""
    plan = ReconcilePlan(container=space_key, checked=len(indexed))
    try:
        listed = reader.page_ids(space_key)
    except ConfluenceAccessError:
        if reader.space_exists(space_key):
            raise
        plan.remove = sorted(indexed)
        return plan
    for doc_id in sorted(indexed):
        page_id = doc_id.rsplit(":", 1)[1]
        stored = indexed[doc_id]
        if page_id in listed:
            known = ancestors.get(doc_id) if ancestors is not None else None
            if known is not None and tuple(str(a) for a in known) != listed[page_id].ancestors:
                current = reader.page_document(page_id)
                if current is not None:
                    plan.rewrite.append(newer_than_stored(current, stored))
                    continue
            acl = reader.listing_acl(listed, page_id, space_key)
            if acl is not None and stored.acl is not None and acl_differs(stored, acl):
                plan.acl_updates[doc_id] = acl
            continue
        current = reader.page_document(page_id)
        if current is None or not reader.settings.wants(ConfluenceSpace(current.container, "", current.container)):
            plan.remove.append(doc_id)
        elif current.container != space_key:
            plan.rewrite.append(newer_than_stored(current, stored))
    return plan
