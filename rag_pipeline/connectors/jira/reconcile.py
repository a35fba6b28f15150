"""Planning a Jira project's reconciliation from the issue ids the project lists now.

Search never returns deleted issues, so a vanished id is looked up by id: gone (404) means deleted
and the document leaves the index; found in another project means moved (new key, same id) and the
document is rewritten there — one document per issue id, never a duplicate — unless the connector
does not sync that project (denied, archived), where nothing would ever reconcile it again, so it
leaves the index. A project the API user can no longer see (deleted, browse revoked) takes its
documents with it.
"""

from __future__ import annotations

from collections.abc import Mapping

from rag_pipeline.connectors.jira.api import JiraAccessError, JiraApiReader, JiraProject
from rag_pipeline.connectors.jira.dump import issue_of
from rag_pipeline.index.store import IndexedDocument
from rag_pipeline.reconciliation.reconcile import ReconcilePlan, newer_than_stored


def plan_project(reader: JiraApiReader, project: str, indexed: Mapping[str, IndexedDocument]) -> ReconcilePlan:
    """Compare the project's indexed issues (``indexed``: this project's documents) with Jira."""
    plan = ReconcilePlan(container=project, checked=len(indexed))
    try:
        listed = {reader.document_id(issue_id) for issue_id in reader.issue_ids(project)}
    except JiraAccessError:
        if reader.project_exists(project):
            raise
        plan.remove = sorted(indexed)
        return plan
    # A restricted comment (its own document) follows its issue: checked through the issue, never looked up alone.
    families: dict[str, list[str]] = {}
    for doc_id in sorted(indexed):
        families.setdefault(issue_of(doc_id), []).append(doc_id)
    for head, family in sorted(families.items()):
        if head in listed:
            continue
        members = [d for d in family if d != head]
        current = reader.issue_document(head.rsplit(":", 1)[1])
        if current is None or not reader.settings.wants(JiraProject(current.container, "", current.container)):
            plan.remove.extend(family)
        elif current.container != project:
            if head in indexed:
                plan.rewrite.append(newer_than_stored(current, indexed[head]))
            # The comments carried the old project's readers: removed now, written again under the new project's
            # when its sync reads the moved issue (a move updates it).
            plan.remove.extend(members)
    return plan
